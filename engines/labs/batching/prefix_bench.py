"""`inferlab bench prefix --json`: hash vs radix prefix caching and FCFS vs LPM, same requests
for every row of a comparison.

    radix_vs_hash_hit_tokens.<scenario>  cached prompt tokens, radix (page 1) / hash, on
                                         multi-turn and doc-qa (simulated H100, Llama-3-8B;
                                         scenario sizes × 4)
    lpm_vs_fcfs_throughput               output tokens/s, LPM / FCFS, radix, few-shot with
                                         FEW_SHOT_PREFIXES example blocks all arriving at once
                                         into a pool of POOL_FRACTION of the working set
    ttft_p50_radix_vs_none               multi-turn on the real model's wall clock (SmolLM2),
                                         TTFT p50 with the radix cache / without a cache (and
                                         the hash cache's), greedy outputs compared
    radix_step_overhead_frac             the tree's host time (match, insert, evict, and the
                                         block accounting: locks, evictable flags) per
                                         iteration / the simulated iteration's time,
                                         OVERHEAD_RUNNING sequences running
                                         (radix_tree_ops_frac: match, insert, evict alone)
"""

from __future__ import annotations

import time

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.labs.batching.session import batching_session, prefix_hit_rate
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import ServingEngine, requests_from_workload
from inferlab.engines.serve.executors import SimulatedExecutor, simulated_pool_blocks
from inferlab.engines.serve.metrics import summarize
from inferlab.engines.serve.prefix_workloads import few_shot, make_scenario
from inferlab.engines.serve.scenarios import SIMULATED_SCENARIO_SCALE
from inferlab.engines.serve.scheduler import Scheduler

SIM_MODEL, SIM_HARDWARE, BLOCK_SIZE = "llama-3-8b", "h100-sxm", 16
FEW_SHOT_REQUESTS, FEW_SHOT_PREFIXES, POOL_FRACTION = 128, 16, 0.3
OVERHEAD_RUNNING = 256


def _simulated(items, prefix_cache: str, schedule: str = "fcfs", n_blocks: int | None = None,
               max_num_seqs: int = 256, timed: bool = False) -> dict:
    """Run WorkloadRequests on the simulated clock; the figures a comparison row needs."""
    cfg, hw = load_model_preset(SIM_MODEL), load_hardware_preset(SIM_HARDWARE)
    if n_blocks is None:
        n_blocks = simulated_pool_blocks(cfg, hw, BLOCK_SIZE)
    blocks = BlockManager(n_blocks, BLOCK_SIZE, prefix_cache=prefix_cache)
    timer = _time_radix(blocks) if timed else None
    scheduler = Scheduler("continuous", blocks, max_num_batched_tokens=2048,
                          max_num_seqs=max_num_seqs, schedule=schedule)
    engine = ServingEngine(scheduler, SimulatedExecutor(cfg, hw),
                           requests_from_workload(items, cfg.vocab_size))
    t0 = time.perf_counter()
    records = engine.run()
    wall_s = time.perf_counter() - t0
    seqs = scheduler.seqs.values()
    out = {"output_tokens_per_s": summarize(engine.timings()).output_tokens_per_s,
           "cached_tokens": sum(s.num_cached_tokens or 0 for s in seqs if s.parent_id is None),
           "prefix_hit_rate": prefix_hit_rate(seqs), "preemptions": scheduler.num_preemptions,
           "iterations": len(records), "simulated_s": engine.now_s, "wall_s": wall_s,
           "blocks": n_blocks}
    if timer is not None:
        busy = [r for r in records if r.running >= OVERHEAD_RUNNING]
        out |= {"radix_tree_s": timer[0], "radix_accounting_s": timer[1],
                "radix_s": timer[0] + timer[1], "busy_iterations": len(busy),
                "running_max": max((r.running for r in records), default=0),
                "iteration_s_mean": sum(r.end_s - r.start_s for r in records) / len(records)}
    return out


TREE_OPS = ("match", "peek", "insert", "ensure_free")
"""The tree's own work: matching, inserting, evicting."""
ACCOUNTING_OPS = ("recheck", "lock", "unlock", "n_available", "blocks_of")
"""What the block pool's view of the tree costs beside it."""


def _time_radix(blocks) -> list[float]:
    """Wrap the manager's radix calls: [tree ops' host seconds, accounting's]."""
    total = [0.0, 0.0]
    radix = blocks.radix
    for cell, names in ((0, TREE_OPS), (1, ACCOUNTING_OPS)):
        for name in names:
            real = getattr(radix, name)

            def timed(*a, _real=real, _cell=cell, **k):
                t = time.perf_counter()
                try:
                    return _real(*a, **k)
                finally:
                    total[_cell] += time.perf_counter() - t

            setattr(radix, name, timed)
    return total


def hit_tokens(scale: float = SIMULATED_SCENARIO_SCALE) -> dict:
    """Cached tokens by hash and by radix on multi-turn and doc-qa (pool never short)."""
    vocab = load_model_preset(SIM_MODEL).vocab_size
    out = {}
    for name in ("multi-turn", "doc-qa"):
        items = make_scenario(name, 0, scale=scale, vocab_size=vocab)
        rows = {pc: _simulated(items, pc) for pc in ("hash", "radix")}
        out[name] = {pc: {k: r[k] for k in ("cached_tokens", "prefix_hit_rate")}
                     for pc, r in rows.items()}
        out[name]["radix_vs_hash_hit_tokens"] = (rows["radix"]["cached_tokens"]
                                                 / max(rows["hash"]["cached_tokens"], 1))
    return out


def few_shot_pressure(n: int = FEW_SHOT_REQUESTS, n_prefixes: int = FEW_SHOT_PREFIXES,
                      pool_fraction: float = POOL_FRACTION) -> dict:
    """LPM vs FCFS on few-shot requests that all wait at once, pool a fraction of what they
    would hold together (each example block once, each request's question and output)."""
    vocab = load_model_preset(SIM_MODEL).vocab_size
    examples = 1024
    items = few_shot(0, n, examples_tokens=examples, question_tokens=32, output_tokens=64,
                     n_prefixes=n_prefixes, rate_per_s=None, vocab_size=vocab)
    blocks = lambda t: -(-t // BLOCK_SIZE)  # noqa: E731
    working_set = n_prefixes * blocks(examples) + sum(
        blocks(w.prompt_tokens - examples + w.output_tokens) for w in items)
    largest = max(blocks(w.prompt_tokens + w.output_tokens) for w in items)
    n_blocks = max(int(working_set * pool_fraction), largest)
    rows = {f"{pc}_{sched}": _simulated(items, pc, sched, n_blocks)
            for pc in ("radix", "hash") for sched in ("fcfs", "lpm")}
    return {"working_set_blocks": working_set, "pool_blocks": n_blocks,
            "rows": {k: {f: r[f] for f in ("output_tokens_per_s", "prefix_hit_rate",
                                           "preemptions")} for k, r in rows.items()},
            "lpm_vs_fcfs_throughput": (rows["radix_lpm"]["output_tokens_per_s"]
                                       / rows["radix_fcfs"]["output_tokens_per_s"]),
            "lpm_vs_fcfs_throughput_hash": (rows["hash_lpm"]["output_tokens_per_s"]
                                            / rows["hash_fcfs"]["output_tokens_per_s"])}


def step_overhead(n: int = 1024) -> dict:
    """The radix tree's host time per iteration against the simulated iteration, with
    OVERHEAD_RUNNING sequences running (few-shot requests all waiting at once)."""
    vocab = load_model_preset(SIM_MODEL).vocab_size
    items = few_shot(0, n, examples_tokens=1024, question_tokens=64, output_tokens=128,
                     n_prefixes=8, rate_per_s=None, vocab_size=vocab)
    r = _simulated(items, "radix", max_num_seqs=OVERHEAD_RUNNING, timed=True)
    per_iteration_s = r["radix_s"] / r["iterations"]
    tree_s = r["radix_tree_s"] / r["iterations"]
    return {"radix_step_overhead_frac": per_iteration_s / r["iteration_s_mean"],
            "radix_tree_ops_frac": tree_s / r["iteration_s_mean"],
            "radix_ms_per_iteration": per_iteration_s * 1e3,
            "radix_tree_ms_per_iteration": tree_s * 1e3,
            "simulated_iteration_ms": r["iteration_s_mean"] * 1e3,
            "radix_share_of_scheduler_wall": r["radix_s"] / r["wall_s"],
            "running_max": r["running_max"], "iterations": r["iterations"]}


def wall_multi_turn(model: str = "smollm2-135m", device: str = "cpu",
                    conversations: int | None = None) -> dict:
    """Multi-turn (the scenario's default `conversations`, or that many) through the real
    model on the wall clock, no cache / hash / radix: TTFT p50 and throughput of each, and
    whether every request's greedy output is the same."""
    vocab = load_lab_model(model, device)[0].config.vocab_size
    items = make_scenario("multi-turn", 0, n=conversations, vocab_size=vocab)
    rows, outputs = {}, {}
    for pc in ("none", "hash", "radix"):
        settings = dict(BATCHING_DEFAULTS, clock="wall", model=model, scenario="multi-turn",
                        prefix_cache=pc)
        session = batching_session(settings, device, items)
        while not session.done:
            session.step()
        m = session.metrics()
        rows[pc] = {"ttft_p50_s": m["ttft_s"]["p50"], "output_tokens_per_s":
                    m["output_tokens_per_s"], "prefix_hit_rate": m["prefix_hit_rate"]}
        outputs[pc] = [o["output_token_ids"] for o in session.outputs()]
    return {"rows": rows, "model": model,
            "ttft_p50_radix_vs_none": rows["radix"]["ttft_p50_s"] / rows["none"]["ttft_p50_s"],
            "ttft_p50_hash_vs_none": rows["hash"]["ttft_p50_s"] / rows["none"]["ttft_p50_s"],
            "outputs_equal": outputs["none"] == outputs["hash"] == outputs["radix"]}


def run_prefix_bench(real: bool = True, model: str = "smollm2-135m",
                     scale: float = SIMULATED_SCENARIO_SCALE, few_shot_requests: int =
                     FEW_SHOT_REQUESTS, overhead_requests: int = 1024) -> dict:
    """Every figure of the module doc; `real=False` leaves the wall-clock part out."""
    hits = hit_tokens(scale)
    pressure = few_shot_pressure(few_shot_requests)
    overhead = step_overhead(overhead_requests)
    out = {"simulated": f"{SIM_MODEL} on {SIM_HARDWARE}",
           "radix_vs_hash_hit_tokens": {k: v["radix_vs_hash_hit_tokens"]
                                        for k, v in hits.items()},
           "hit_tokens": hits, "lpm_vs_fcfs_throughput": pressure["lpm_vs_fcfs_throughput"],
           "few_shot_pressure": pressure,
           "radix_step_overhead_frac": overhead["radix_step_overhead_frac"],
           "step_overhead": overhead, "ttft_p50_radix_vs_none": None}
    if real:
        wall = wall_multi_turn(model)
        out |= {"ttft_p50_radix_vs_none": wall["ttft_p50_radix_vs_none"], "wall": wall}
    return out
