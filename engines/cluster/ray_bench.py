"""The layout search on Ray against the same search serially: `ray_search_speedup`.

    serial_s     the search, every probe here one after another
    ray_init_s   a local Ray of `workers` CPUs started (ray.init) and each worker's first
                 import of the probe's module (torch, the simulator): paid once per search,
                 reported beside the ratio, never in it
    ray_s        the same search fanned out on that warm Ray
    speedup      serial_s / ray_s; `same_result`: the two SearchResults are equal

The defaults are the issue's figure, `ray_search_speedup_2_workers` (goal ≥ 1.6): the ep
search of DeepSeek-V3 on 64 H200s, 204 layouts (`ray_search_part`, for `inferlab bench moe`).
Both timings share the machine with whatever else runs: `load_avg_1min` (before) says how
quiet it was, and the ratio is only as good as that (2 workers want 2 idle cores)."""

from __future__ import annotations

import importlib
import math
import os
import time

from inferlab.engines.cluster.cluster import ClusterConfig
from inferlab.engines.cluster.fanout import (
    NO_RAY,
    RAY,
    Fanout,
    import_ray,
    ray_session,
    run_probes,
)
from inferlab.engines.cluster.layout import EP, REPLICAS, Layout
from inferlab.engines.cluster.links import load_link_preset
from inferlab.engines.cluster.search import search_layouts
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import requests_from_workload
from inferlab.engines.serve.metrics import SLO
from inferlab.engines.serve.workload import LengthDist, Workload, generate

BENCH_SLO = SLO(ttft_s=1.0, tpot_s=0.05)
WARM_S = 0.5  # each warm-up task holds its worker this long, so that every worker gets one


def import_module_and_hold(name: str, hold_s: float) -> str:
    """A warm-up task: import `name` in this worker, then hold it `hold_s` seconds."""
    importlib.import_module(name)
    time.sleep(hold_s)
    return name


def ray_search_speedup(workers: int = 2, kind: str = EP, model_config: str = "deepseek-v3",
                       hardware: str = "h200", link: str = "nvlink4", budget: int = 64,
                       requests: int = 200, rate_per_s: float = 50.0, seed: int = 0,
                       slo: SLO = BENCH_SLO) -> dict:
    """The search of `kind` on `budget` GPUs of `hardware` serving `model_config`
    (`requests` seeded lognormal requests, median prompt 403 and output 148 tokens, at
    `rate_per_s`), serially and on a local Ray of `workers` CPUs."""
    cfg = load_model_preset(model_config)
    base = ClusterConfig(cfg, load_hardware_preset(hardware), load_link_preset(link),
                         Layout(REPLICAS))
    items = generate(Workload(requests, rate_per_s=rate_per_s, seed=seed,
                              prompt_len=LengthDist.lognormal(math.log(403), 0.5),
                              output_len=LengthDist.lognormal(math.log(148), 0.5)))
    reqs = requests_from_workload(items, cfg.vocab_size)
    load_before = os.getloadavg()[0]

    start = time.perf_counter()
    serial = search_layouts(base, kind, budget, reqs, slo)
    serial_s = time.perf_counter() - start

    fanout = Fanout(RAY, workers=workers)
    start = time.perf_counter()
    with ray_session(fanout):
        run_probes(import_module_and_hold, [(search_layouts.__module__, WARM_S)] * workers,
                   fanout=fanout)
        ray_init_s = time.perf_counter() - start
        start = time.perf_counter()
        on_ray = search_layouts(base, kind, budget, reqs, slo, fanout=fanout)
        ray_s = time.perf_counter() - start
    return {"kind": kind, "model": cfg.id, "hardware": base.hardware.id, "budget_gpus": budget,
            "requests": requests, "probes": len(serial.cells), "workers": workers,
            "serial_s": serial_s, "ray_s": ray_s, "ray_init_s": ray_init_s,
            "speedup": serial_s / ray_s, "same_result": on_ray == serial,
            "executor": on_ray.executor, "cores": os.cpu_count(),
            "load_avg_1min": load_before}


def ray_search_part() -> dict:
    """`inferlab bench moe`'s figure: ray_search_speedup_2_workers and its timings (the
    serial search is skipped where ray is not installed: the figure is then None)."""
    if import_ray() is None:
        return {"ray_search_speedup_2_workers": None, "ray_search": {"executor": NO_RAY}}
    figures = ray_search_speedup(workers=2)
    return {"ray_search_speedup_2_workers": figures["speedup"], "ray_search": figures}
