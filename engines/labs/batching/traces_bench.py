"""`inferlab bench traces --json`: published-trace replay, issue 43's figures.

    csv_rows_per_s                              rows/s read_trace yields from a generated
                                                Azure-format CSV (goal ≥ 300,000)
    mooncake_simulated_requests_per_s_of_wall   a generated Mooncake-format trace's first
                                                10 minutes (engines/serve/traces/bench.py:
                                                Kimi-shaped lengths and block sharing) through
                                                the batching lab on the simulated clock
                                                (Llama-3-8B on an H100, the lab's defaults):
                                                requests / wall s, from opening the file to the
                                                last request's last token (goal ≥ 1,500)

The collector is held off while the trace is read and run (engines/gc_pause.py), as `run
batching` does. Beside them: the split of that wall time (reading and making prompts from the block ids /
building the session / stepping it), the trace's unbounded hit rate and the run's.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from inferlab.engines.gc_pause import gc_paused
from inferlab.engines.labs.batching.session import batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.traces.bench import csv_rows_per_s, write_mooncake_jsonl
from inferlab.engines.serve.traces.replay import trace_workload


def mooncake_simulated(duration_s: float = 600.0, seed: int = 0) -> dict:
    """The generated trace's `duration_s` through the batching lab's simulated clock."""
    settings = dict(BATCHING_DEFAULTS, clock="simulated")
    vocab = load_model_preset(settings["model_config"]).vocab_size
    with tempfile.TemporaryDirectory() as folder, gc_paused():
        path = Path(folder) / "mooncake.jsonl"
        write_mooncake_jsonl(path, duration_s, seed=seed)
        t0 = time.perf_counter()
        items, figures = trace_workload(path, None, f"0:{duration_s}", 1.0, None, seed, vocab)
        t1 = time.perf_counter()
        session = batching_session(dict(settings, requests=min(len(items), 100_000)),
                                   items=items)
        t2 = time.perf_counter()
        while not session.done:
            session.step()
        t3 = time.perf_counter()
    n = len(items)
    return {"mooncake_requests": n,
            "mooncake_simulated_requests_per_s_of_wall": n / (t3 - t0),
            "mooncake_wall_s": t3 - t0,
            "mooncake_read_and_content_s": t1 - t0,
            "mooncake_session_build_s": t2 - t1,
            "mooncake_run_s": t3 - t2,
            "mooncake_iterations": session.step_index,
            "mooncake_simulated_s": session.engine.now_s,
            "mooncake_trace_hit_rate_unbounded": figures["trace_hit_rate_unbounded"],
            "mooncake_prefix_hit_rate": session.prefix_hit_rate(),
            "mooncake_model": settings["model_config"],
            "mooncake_hardware": settings["hardware"]}


def run_traces_bench(csv_rows: int = 1_000_000, mooncake_s: float = 600.0) -> dict:
    csv = csv_rows_per_s(csv_rows)
    return {"csv_rows_per_s": csv["csv_rows_per_s"], "csv_rows": csv["rows"],
            **mooncake_simulated(mooncake_s)}
