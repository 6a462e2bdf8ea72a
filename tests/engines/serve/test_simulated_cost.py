"""The simulated executor's batch time, summed without building a record per part, is the
roofline time of mixed_step_cost's parts (sum_costs, formulas) to the last bit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.roofline import formulas
from inferlab.engines.roofline.layer_costs import attention_decode_cost, attention_prefill_cost
from inferlab.engines.roofline.memory import kv_bytes_per_request
from inferlab.engines.roofline.op_cost import OpCost, sum_costs
from inferlab.engines.roofline.step_costs import decode_step_parts
from inferlab.engines.serve.executors import SimulatedExecutor, mixed_step_cost


def _reference_time_s(cfg, peak, bw, prefills, n_decodes, context, dtype="fp16"):
    """The cost as the parts say it, one OpCost each, then F / min(P, I × W) in numpy."""
    n_tokens = sum(n for _, n in prefills) + n_decodes
    n_seqs = len(prefills) + n_decodes
    by_tokens = {p.name: p for p in decode_step_parts(cfg, n_tokens, 1, dtype, dtype, dtype)}
    by_seqs = {p.name: p for p in decode_step_parts(cfg, n_seqs, 1, dtype, dtype, dtype)}
    parts = [by_tokens["linears"], by_tokens["embeddings and norms"], by_tokens["kv write"],
             by_seqs["lm_head"]]
    for start, n in prefills:
        parts.append(attention_prefill_cost(cfg, n, 1, dtype, dtype))
        if start:
            parts.append(OpCost("cached", attention_decode_cost(cfg, n, start, dtype,
                                                                dtype).flops,
                                kv_bytes_per_request(cfg, start, dtype)))
    if n_decodes:
        parts.append(attention_decode_cost(cfg, n_decodes, context / n_decodes, dtype, dtype))
    cost = sum_costs("step", parts)
    intensity = formulas.arithmetic_intensity(cost.flops, cost.bytes_moved)
    return float(cost.flops / formulas.attainable_flops(peak, bw, intensity))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["llama-3-8b", "gemma-3-27b", "deepseek-v3", "gpt-oss-20b"]),
       st.lists(st.tuples(st.integers(0, 50_000), st.integers(1, 4096)), max_size=4),
       st.integers(0, 300), st.integers(0, 2_000_000))
def test_batch_time_is_the_parts_roofline_time_exactly(model, prefills, n_decodes, context):
    if not prefills and not n_decodes:
        n_decodes = 1
    context = max(context, n_decodes)
    cfg, h100 = load_model_preset(model), load_hardware_preset("h100-sxm")
    ex = SimulatedExecutor(cfg, h100)
    got = ex.batch_time_s(prefills, n_decodes, context)
    assert got == _reference_time_s(cfg, ex.peak_flops, ex.bw_bytes_per_s, prefills,
                                     n_decodes, context)
    cost = mixed_step_cost(cfg, prefills, [context / n_decodes] * n_decodes if n_decodes
                           else [])
    assert cost.flops > 0 and cost.bytes_moved > 0
