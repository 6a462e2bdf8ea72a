"""The step lab's run on the tiny model: each execution's ops, split and check against eager;
settings and inputs refused by name."""

from __future__ import annotations

import math

import pytest

from inferlab.engines.labs.step.executions import step_inputs
from inferlab.engines.labs.step.session import step_run
from inferlab.engines.labs.step.settings import check_step_settings


def test_split_adds_up_to_each_step(run):
    _settings, _info, executions = run
    for r in executions:
        s = r.split
        assert math.fsum([s.at_roof_s, s.inside_ops_s, s.between_ops_s]) == \
            pytest.approx(r.step_s, abs=1e-12)
        assert min(s.at_roof_s, s.inside_ops_s, s.between_ops_s) >= 0
        assert s.ops_s == pytest.approx(sum(op.dur_s for op in r.ops))


def test_native_matches_eager_and_shows_its_kernels(run):
    _settings, info, executions = run
    eager, native = executions
    assert (eager.execution, native.execution) == ("eager", "native")
    assert eager.max_abs_diff == 0.0 and eager.matches
    assert native.matches and native.max_abs_diff <= 1e-5 * native.max_abs_logit
    assert eager.native_kernels == 0
    assert native.native_kernels == 11 * 2 + 1  # tiny: 2 layers
    assert "native decoder" in native.lanes and eager.lanes == ("thread 0",)
    # the eager step runs its layers as aten ops; the native one only the glue around them
    assert sum(op.name == "aten::scaled_dot_product_attention" for op in eager.ops) == 2
    assert not any(op.name == "aten::scaled_dot_product_attention" for op in native.ops)
    assert info.rows == 2 and info.threads == 1


def test_every_linear_and_attention_is_costed(run):
    _settings, _info, executions = run
    for r in executions:
        for op in r.ops:
            if op.name in ("aten::linear", "aten::matmul", "native::qkv", "native::attention",
                           "native::lm_head", "aten::scaled_dot_product_attention"):
                assert op.costed and op.flops > 0 and op.bytes > 0, op


def test_prefill_of_n_tokens():
    settings = check_step_settings({"phase": "prefill", "tokens": 24, "repeats": 1,
                                    "threads": 1, "executions": ["native"]})
    info, (native,) = step_run(settings)
    assert info.rows == 24 and native.matches  # checked against an unprofiled eager step
    qkv = [op for op in native.ops if op.name == "native::qkv"]
    cfg_d, qkv_out = 64, (4 + 2 * 2) * 16
    assert qkv[0].flops == 2 * 24 * qkv_out * cfg_d


def test_inputs_are_seeded_and_shaped():
    decode = check_step_settings({"batch": 3, "context": 5})
    assert [len(ids) for ids in step_inputs(decode, 256)] == [6, 6, 6]
    assert step_inputs(decode, 256) == step_inputs(decode, 256)
    prefill = check_step_settings({"phase": "prefill", "tokens": 7})
    assert [len(ids) for ids in step_inputs(prefill, 256)] == [7]


@pytest.mark.parametrize("bad, field", [
    ({"phase": "verify"}, "settings.phase"), ({"batch": 0}, "settings.batch"),
    ({"executions": ["eager", "jit"]}, "settings.executions"),
    ({"executions": []}, "settings.executions"),
    ({"executions": ["eager", "eager"]}, "settings.executions"),
    ({"repeats": 0}, "settings.repeats")])
def test_bad_settings_named(bad, field):
    with pytest.raises(ValueError, match=field):
        check_step_settings(bad)


def test_a_step_past_the_context_and_an_unknown_model_are_named():
    with pytest.raises(ValueError, match=r"settings\.context"):
        step_run(check_step_settings({"context": 2048, "threads": 1}))
    with pytest.raises(ValueError, match=r"settings\.model"):
        step_run(check_step_settings({"model": "no-such-model"}))
