"""Property tests: the roofline never exceeds either roof; max_batch is exactly the largest fit."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.model.config import load_model_preset
from inferlab.engines.roofline.costs import decode_step_cost
from inferlab.engines.roofline.formulas import attainable_flops, predicted_time_s
from inferlab.engines.roofline.memory import plan_memory

positive = st.floats(min_value=1e-3, max_value=1e18, allow_nan=False, allow_infinity=False)
SMOLLM2 = load_model_preset("smollm2-135m")


@settings(max_examples=200, deadline=None)
@given(peak=positive, bw=positive, intensity=positive)
def test_attainable_is_under_both_roofs_and_on_one(peak, bw, intensity):
    attained = attainable_flops(peak, bw, intensity)
    assert attained <= peak and attained <= intensity * bw
    assert attained in (peak, intensity * bw)


@settings(max_examples=200, deadline=None)
@given(flops=positive, bytes_moved=positive, peak=positive, bw=positive)
def test_predicted_time_is_the_slower_roof(flops, bytes_moved, peak, bw):
    t = predicted_time_s(flops, bytes_moved, peak, bw)
    assert t >= flops / peak and t >= bytes_moved / bw


@settings(max_examples=100, deadline=None)
@given(context=st.integers(1, 65_536), batch=st.integers(1, 64),
       memory_bytes=st.integers(10**8, 10**11), utilization=st.floats(0.5, 1.0),
       kv_heads=st.sampled_from([1, 3, 9]))
def test_max_batch_and_max_context_are_the_largest_that_fit(context, batch, memory_bytes,
                                                            utilization, kv_heads):
    cfg = replace(SMOLLM2, n_kv_heads=kv_heads)
    kwargs = dict(device_memory_bytes=memory_bytes, utilization=utilization)
    plan = plan_memory(cfg, context, batch, **kwargs)
    if plan.max_batch >= 1:
        assert plan_memory(cfg, context, plan.max_batch, **kwargs).fits
    assert not plan_memory(cfg, context, plan.max_batch + 1, **kwargs).fits
    if plan.max_context >= 1:
        assert plan_memory(cfg, plan.max_context, batch, **kwargs).fits
    assert not plan_memory(cfg, plan.max_context + 1, batch, **kwargs).fits
    assert plan.fits == (plan.max_batch >= batch) == (plan.max_context >= context)


@settings(max_examples=50, deadline=None)
@given(context=st.integers(1, 32_768), b1=st.integers(1, 512), b2=st.integers(1, 512))
def test_decode_intensity_never_falls_as_batch_grows(context, b1, b2):
    small, large = sorted((b1, b2))
    assert (decode_step_cost(SMOLLM2, large, context).intensity
            >= decode_step_cost(SMOLLM2, small, context).intensity * (1 - 1e-12))
