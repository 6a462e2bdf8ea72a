"""`inferlab bench moe --json`: the MoE figures, in one run.

    grouped_vs_per_token_decode_b32      the tiny MoE on this CPU, native kernels, one thread:
                                         the MoE layers of a real batch-32 decode step (the
                                         router inputs of the shipped prompts' step), per-token
                                         loop time / grouped time, medians of interleaved
                                         repeats (goal ≥ 3)
    distinct_experts_measured_vs_formula a uniform router: mean distinct experts over seeded
                                         draws / E·(1 − (1 − k/E)^B), the one farthest from 1
                                         over the (E, k, B) cases (goal within 0.05 of 1)

    ep_all_to_all_vs_deepep_low_latency  our dispatch / combine closed form at each row's
                                         measured bandwidth over DeepEP's measured time (its V1
                                         low-latency table), the ratio farthest from 1 (goal:
                                         every row within 0.15 of 1; engines/cluster/deepep.py)
    ray_search_speedup_2_workers         the ep layout search of DeepSeek-V3 on 64 H200s, serial
                                         time / time on a local Ray of 2 workers (goal ≥ 1.6;
                                         None without ray; engines/cluster/ray_bench.py)
"""

from __future__ import annotations

import statistics
import time

import torch

from inferlab.engines.cluster.deepep import deepep_part
from inferlab.engines.cluster.ray_bench import ray_search_part
from inferlab.engines.labs.moe.session import MoESession, moe_model, run_info
from inferlab.engines.labs.moe.uniform import measured_over_formula
from inferlab.engines.model import moe as moe_block

GOALS = {"grouped_vs_per_token_decode_b32": ">= 3",
         "distinct_experts_measured_vs_formula": "within 0.05 of 1",
         "ep_all_to_all_vs_deepep_low_latency": "every row within 0.15 of 1",
         "ray_search_speedup_2_workers": ">= 1.6"}
UNIFORM_CASES = ((8, 2), (32, 4), (128, 8), (256, 8))
"""(E, k): the tiny MoE, gpt-oss-20b, Qwen3-30B-A3B, DeepSeek-V3."""
UNIFORM_BATCHES = (1, 4, 16, 64)
CLUSTER_PARTS: tuple = (deepep_part, ray_search_part)
"""() -> figures of the expert-parallel simulator and the Ray search."""


def grouped_vs_per_token(batch: int = 32, repeats: int = 15) -> dict:
    """The MoE layers of one real decode step of `batch` tokens, grouped against per token."""
    model, tok = moe_model("tiny-moe", kernels="native")
    session = MoESession(model, tok, run_info("tiny-moe", model), batch, batch, 1)
    session.step()
    cfg = model.config
    pairs = [(model.layers[i].moe, h) for i, h in zip(session.info.moe_layers, session.hidden,
                                                      strict=True)]
    fns = {"grouped": moe_block.forward_grouped, "per_token": moe_block.forward_per_token}
    times: dict[str, list[float]] = {name: [] for name in fns}
    with torch.inference_mode():
        for fn in fns.values():  # once each, untimed (first-call costs)
            for block, h in pairs:
                fn(cfg, block, h)
        for r in range(repeats):
            for name in (fns if r % 2 == 0 else reversed(fns)):  # interleaved, order swapped
                start = time.perf_counter()
                for block, h in pairs:
                    fns[name](cfg, block, h)
                times[name].append(time.perf_counter() - start)
        diff = max(float((fns["grouped"](cfg, b, h) - fns["per_token"](cfg, b, h)).abs().max())
                   for b, h in pairs)
    grouped, per_token = (statistics.median(times[k]) for k in fns)
    return {"grouped_vs_per_token_decode_b32": per_token / grouped,
            "grouped_decode_b32_s": grouped, "per_token_decode_b32_s": per_token,
            "grouped_decode_b32_max_abs_diff": diff, "kernel_path": model.kernel_path,
            "moe_layers": len(pairs),
            "expert_reads_grouped": sum(moe_block.experts_touched(
                moe_block.route(cfg, b, h)[1]) for b, h in pairs),
            "expert_reads_per_token": len(pairs) * batch * cfg.n_experts_active}


def distinct_vs_formula(draws: int = 4000) -> dict:
    """Measured / formula for every (E, k) of UNIFORM_CASES at every B of UNIFORM_BATCHES;
    the headline is the ratio farthest from 1."""
    ratios = {}
    for seed, (e, k) in enumerate(UNIFORM_CASES):
        for b in UNIFORM_BATCHES:
            measured, formula = measured_over_formula(e, k, b, draws, seed)
            ratios[f"E{e}_k{k}_B{b}"] = measured / formula
    worst = max(ratios.values(), key=lambda r: abs(r - 1.0))
    return {"distinct_experts_measured_vs_formula": worst,
            "distinct_experts_ratios": ratios, "distinct_experts_draws": draws}


def run_moe_bench() -> dict:
    """Every MoE figure as one flat dict, on one thread (the CPU's other cores left alone)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = grouped_vs_per_token()
        out.update(distinct_vs_formula())
    finally:
        torch.set_num_threads(threads)
    for part in CLUSTER_PARTS:
        out.update(part())
    out["goals"] = GOALS
    return out
