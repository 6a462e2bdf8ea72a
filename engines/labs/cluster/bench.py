"""`inferlab bench cluster --json`: the cluster lab's figures, each measured in this run.

    pd_vs_colocated_goodput_per_gpu   DistServe's comparison: the best prefill/decode split's
                                      max goodput per GPU / the best colocated layout's, 8 ×
                                      H100, Llama-3-8B, long prompts (≈ 2k tokens), short
                                      outputs (≈ 64), a tight TPOT objective (> 1 expected)
    pd_vs_colocated_goodput_per_gpu_short_loose   the same on 4 GPUs, short prompts (≈ 128)
                                      and outputs (≈ 128), a loose TPOT objective (< 1
                                      expected: the prefill GPUs sit idle)
    prefix_router_vs_round_robin_hit_rate   prefix hit rate of the prefix-aware router / of
                                      round-robin, multi-turn traffic on 4 replicas
    simulated_requests_per_s_of_wall  5,000 requests through one H100 instance per wall second
                                      (the batching lab's simulator bench settings: no prefix
                                      caching), beside the batching lab's own engine alone
                                      (cluster_vs_one_engine_speed) and with block hashing
    search_wall_s                     a 16-GPU layout search (replicas × t), 1,000 requests
    ep_vs_tp_goodput_per_gpu          a MoE on 8 × H100 (Qwen3-30B-A3B, 128 experts, top-8):
                                      the best expert-parallel layout's max goodput per GPU
                                      (attention data-parallel, experts over e GPUs) / the
                                      best tensor-parallel one's (replicas × t)

Every max goodput is `goodput.max_goodput_per_gpu`: the same requests at scaled arrival
rates, each probe a full simulated run."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from inferlab.engines.cluster.cluster import ClusterConfig, run_cluster
from inferlab.engines.cluster.goodput import max_goodput_per_gpu
from inferlab.engines.cluster.layout import EP, PD, REPLICAS, Layout
from inferlab.engines.cluster.links import load_link_preset
from inferlab.engines.cluster.search import search_layouts
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import bench_simulator, requests_from_workload
from inferlab.engines.serve.metrics import SLO
from inferlab.engines.serve.prefix_workloads import make_scenario
from inferlab.engines.serve.workload import LengthDist, Workload, generate


def _requests(cfg, n: int, prompt_tokens: float, output_tokens: float, rate_per_s: float,
              seed: int = 0):
    items = generate(Workload(n, rate_per_s=rate_per_s,
                              prompt_len=LengthDist.lognormal(math.log(prompt_tokens), 0.3),
                              output_len=LengthDist.lognormal(math.log(output_tokens), 0.3),
                              seed=seed))
    return requests_from_workload(items, cfg.vocab_size)


PD_SPLITS = {8: ((2, 6), (4, 4), (6, 2)), 4: ((1, 3), (2, 2), (3, 1))}
"""P:D splits (t = 1) the DistServe comparison tries on 8 and on 4 GPUs; the best counts."""


@dataclass(frozen=True)
class PdCase:
    """One side of DistServe's comparison: the GPUs, the lengths, the objectives, and the
    arrival window each goodput probe draws at its rate (overload must show as a growing
    queue: the window is several times the longest wait the TPOT objective allows, TPOT ×
    outputs; a fixed list of requests at a high rate is one burst instead)."""

    gpus: int
    prompt_tokens: float
    output_tokens: float
    slo: SLO
    window_s: float
    max_requests: int = 6000
    min_requests: int = 200


BISECTIONS = 3  # of each max-goodput bracket: rates known to a factor 2^(1/8) ≈ 1.09

LONG_TIGHT = PdCase(8, 2048, 64, SLO(ttft_s=1.0, tpot_s=0.010), window_s=8.0)
SHORT_LOOSE = PdCase(4, 128, 128, SLO(ttft_s=1.0, tpot_s=0.025), window_s=6.0)


def case_goodput(base: ClusterConfig, case: PdCase, start_rate_per_s: float):
    """layout -> its MaxGoodput (max_goodput_per_gpu) on `base` for `case`: each probe's
    requests drawn over the case's arrival window at the probed rate, from `start_rate_per_s`."""
    cfg = base.model

    def requests_at(rate: float):
        n = min(case.max_requests, max(case.min_requests, round(rate * case.window_s)))
        return _requests(cfg, n, case.prompt_tokens, case.output_tokens, rate)

    def goodput(layout):
        return max_goodput_per_gpu(replace(base, layout=layout), requests_at, case.slo,
                                   start_rate_per_s=start_rate_per_s, doublings=8,
                                   bisections=BISECTIONS)
    return goodput


def pd_vs_colocated(base: ClusterConfig, case: PdCase) -> dict:
    """Max goodput per GPU of `case.gpus` replicas and of each P:D split; the ratio of the
    bests."""
    goodput = case_goodput(base, case, 16.0 * case.gpus)

    colocated = goodput(Layout(REPLICAS, replicas=case.gpus))
    splits = {f"{p}P:{d}D": goodput(Layout(PD, prefill=p, decode=d))
              for p, d in PD_SPLITS[case.gpus]}
    best = max(splits, key=lambda k: splits[k].goodput_per_gpu)
    ratio = (splits[best].goodput_per_gpu / colocated.goodput_per_gpu
             if colocated.goodput_per_gpu else math.inf)
    # a rate past max_requests / window_s is judged on a shorter window: say so
    too_fast = case.max_requests / case.window_s
    return {"ratio": ratio, "gpus": case.gpus, "prompt_tokens": case.prompt_tokens,
            "output_tokens": case.output_tokens, "slo_ttft_s": case.slo.ttft_s,
            "slo_tpot_s": case.slo.tpot_s,
            "colocated_goodput_per_gpu": colocated.goodput_per_gpu, "best_pd": best,
            "pd_goodput_per_gpu": {k: v.goodput_per_gpu for k, v in splits.items()},
            "capped": [k for k, v in (("colocated", colocated), *splits.items())
                       if v.capped or v.rate_per_s > too_fast],
            "probes": sum(len(v.probes) for v in (colocated, *splits.values())),
            # each goodput is known to within this factor (the bisection's last bracket)
            "rate_resolution_factor": 2 ** (1 / 2 ** BISECTIONS)}


MOE_CASE = PdCase(8, 512, 128, SLO(ttft_s=1.0, tpot_s=0.05), window_s=8.0)
EP_LAYOUTS = {"1 × ep8": Layout(EP, ep=8), "2 × ep4": Layout(EP, ep=4, replicas=2),
              "1 × ep8 t2": Layout(EP, tp=2, ep=8)}
TP_LAYOUTS = {f"{8 // t} × t{t}": Layout(REPLICAS, tp=t, replicas=8 // t) for t in (1, 2, 4)}


def ep_vs_tp(case: PdCase = MOE_CASE, model_config: str = "qwen3-30b-a3b") -> dict:
    """Max goodput per GPU of each EP_LAYOUTS and TP_LAYOUTS layout of `model_config` on
    `case.gpus` H100s over NVLink; the ratio of the bests (EP / TP)."""
    cfg = load_model_preset(model_config)
    base = ClusterConfig(cfg, load_hardware_preset("h100-sxm"), load_link_preset("nvlink4"),
                         Layout(REPLICAS))
    goodput = case_goodput(base, case, 4.0 * case.gpus)
    ep = {label: goodput(layout).goodput_per_gpu for label, layout in EP_LAYOUTS.items()}
    tp = {label: goodput(layout).goodput_per_gpu for label, layout in TP_LAYOUTS.items()}
    best_ep, best_tp = max(ep, key=ep.get), max(tp, key=tp.get)
    return {"ratio": ep[best_ep] / tp[best_tp] if tp[best_tp] else math.inf,
            "model": cfg.id, "gpus": case.gpus, "prompt_tokens": case.prompt_tokens,
            "output_tokens": case.output_tokens, "slo_ttft_s": case.slo.ttft_s,
            "slo_tpot_s": case.slo.tpot_s, "ep_goodput_per_gpu": ep,
            "tp_goodput_per_gpu": tp, "best_ep": best_ep, "best_tp": best_tp}


def run_cluster_bench() -> dict:
    cfg, h100 = load_model_preset("llama-3-8b"), load_hardware_preset("h100-sxm")
    base = ClusterConfig(cfg, h100, load_link_preset("nvlink4"), Layout(REPLICAS))
    out: dict = {"model": cfg.id, "hardware": h100.id, "link": base.link.id}

    long = pd_vs_colocated(base, LONG_TIGHT)
    short = pd_vs_colocated(base, SHORT_LOOSE)
    out["pd_vs_colocated_goodput_per_gpu"] = long.pop("ratio")
    out["pd_vs_colocated_long_tight"] = long
    out["pd_vs_colocated_goodput_per_gpu_short_loose"] = short.pop("ratio")
    out["pd_vs_colocated_short_loose"] = short

    chat = requests_from_workload(make_scenario("multi-turn", 0, n=32, scale=4,
                                                vocab_size=cfg.vocab_size), cfg.vocab_size)
    rates = {}
    for router in ("round-robin", "prefix"):
        config = replace(base, layout=Layout(REPLICAS, replicas=4), router=router)
        rates[router] = run_cluster(config, chat).prefix_hit_rate()
    out["prefix_hit_rate"] = rates
    out["prefix_router_vs_round_robin_hit_rate"] = (
        rates["prefix"] / rates["round-robin"] if rates["round-robin"] else math.inf)

    # the batching lab's simulator bench (engine.bench_simulator) with the same settings:
    # no prefix caching, 256 sequences; then with block hashing, the cluster's default
    stream = _requests(cfg, 5000, 403, 148, 50.0)
    for key, prefix_cache in (("simulated_requests_per_s_of_wall", "none"),
                              ("simulated_requests_per_s_of_wall_hashing", "hash")):
        config = replace(base, prefix_cache=prefix_cache, max_num_seqs=256)
        t0 = time.perf_counter()
        run_cluster(config, stream)
        out[key] = len(stream) / (time.perf_counter() - t0)
    one = bench_simulator(5000)
    out["one_engine_requests_per_s_of_wall"] = one["requests_per_wall_s"]
    out["cluster_vs_one_engine_speed"] = (out["simulated_requests_per_s_of_wall"]
                                          / one["requests_per_wall_s"])

    t0 = time.perf_counter()
    found = search_layouts(base, REPLICAS, 16, _requests(cfg, 1000, 403, 148, 100.0),
                           SLO(ttft_s=1.0, tpot_s=0.05))
    out["search_wall_s"] = time.perf_counter() - t0
    out["search_layouts"] = len(found.cells)
    out["search_best"] = None if found.best is None else found.cells[found.best].layout.label

    moe = ep_vs_tp()
    out["ep_vs_tp_goodput_per_gpu"] = moe.pop("ratio")
    out["ep_vs_tp"] = moe
    return out
