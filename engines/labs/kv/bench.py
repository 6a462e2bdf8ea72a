"""`inferlab bench kv --json`: the KV figures, in one run (the grid's draw time,
`grid_render_ms_100k`, is the window's: app/benches/kv_view.py adds it).

    engines.kv.bench.run_kv_bench      paged / contiguous waste, paged attention time ratio,
                                       allocator ops/s, prefix hit rate (synthetic streams)
    engines.model.bench.run_model_bench  decode_tokens_per_s (ours) and
                                       transformers_tokens_per_s, SmolLM2, same process
    kv_lab_*                           the KV lab's own scenarios on the tiny model: waste at
                                       each allocator's peak, the shared-prompt hit rate

A part that cannot run (no transformers, no SmolLM2) reports its error beside None figures.
"""

from __future__ import annotations

import numpy as np
import torch

from inferlab.engines.kv.bench import run_kv_bench
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.kv.pool_state import KVPoolState
from inferlab.engines.labs.kv.metrics import kv_metrics
from inferlab.engines.labs.kv.session import kv_run
from inferlab.engines.labs.kv.settings import KV_DEFAULTS
from inferlab.engines.model.bench import run_model_bench

GRID_BLOCKS = 100_000


def synthetic_pool(n_blocks: int = GRID_BLOCKS, n_requests: int = 3000,
                   seed: int = 0) -> KVPoolState:
    """A realistic pool state: ragged prompts, a shared system prompt on every third request,
    forks, a quarter of the requests freed (cached-free blocks)."""
    rng = np.random.default_rng(seed)
    mgr = BlockManager(n_blocks, 16)
    system = list(range(1000, 1256))
    for i in range(n_requests):
        user = rng.integers(0, 30000, int(rng.integers(16, 1000))).tolist()
        mgr.allocate(i, (system if i % 3 == 0 else []) + user)
        mgr.mark_computed(i, mgr.num_tokens(i))  # its prefill ran: full blocks are cached
        if i % 5 == 0:
            mgr.fork(i, -i - 1)
    for i in range(0, n_requests, 4):
        mgr.free(i)
    return mgr.pool_state()


def lab_scenarios() -> dict:
    """The lab's scenarios on the tiny model, to the end: what the lab itself shows."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = {}
        for name in ("ragged", "shared-prompt"):
            settings = dict(KV_DEFAULTS, model="tiny", scenario=name)
            _session, records = kv_run(settings)
            m = kv_metrics(records)
            key = name.replace("-", "_")
            out[f"kv_lab_{key}_paged_waste_frac"] = m["paged_waste_frac"]
            out[f"kv_lab_{key}_contiguous_waste_frac"] = m["contiguous_waste_frac"]
            out[f"kv_lab_{key}_prefix_hit_rate"] = m["prefix_hit_rate"]
        return out
    finally:
        torch.set_num_threads(threads)


def run_kv_lab_bench(quick: bool = False, model_bench: bool = True) -> dict:
    """Every KV engine figure as one flat dict (`quick`: small workloads, no model bench)."""
    out = dict(run_kv_bench(quick=quick))
    out.update(lab_scenarios())
    out["decode_tokens_per_s"] = None
    out["transformers_tokens_per_s"] = None
    if model_bench and not quick:
        try:
            model = run_model_bench()
        except (ImportError, ValueError, RuntimeError, OSError) as exc:
            out["model_bench_error"] = f"{type(exc).__name__}: {exc}"
        else:
            for key, value in model.items():
                out[key if key in ("decode_tokens_per_s", "transformers_tokens_per_s")
                    else f"model_{key}"] = value
            tf = out["transformers_tokens_per_s"]
            if tf:
                out["decode_speedup_vs_transformers"] = out["decode_tokens_per_s"] / tf
    return out
