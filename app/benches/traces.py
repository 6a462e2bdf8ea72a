"""`inferlab bench traces --json`: issue 43's figures, published traces through each place they
go, in one run.

    csv_rows_per_s, mooncake_*        reading an Azure-format CSV; a Mooncake-shaped trace's first
                                      10 minutes through the batching lab's simulated clock
                                      (engines/labs/batching/traces_bench.py)
    autoscale_*, peak_fleet_*         the shipped Azure conversation window through a KPA
                                      autoscaled fleet and the fixed fleet that meets the SLO
                                      (engines/labs/cluster/autoscale_bench.py)
    fidelity_*                        a trace window against a real llama.cpp server beside the
                                      simulated clock with a cost fitted to it: per-request TTFT
                                      and E2E error (engines/endpoint/fidelity.py; skipped, and
                                      said, without llama-cpp-python)

Each part runs alone in turn (the server's while nothing else does); every part's own wall
time is beside its figures. It composes three labs' figures, so it lives at the app level.
"""

from __future__ import annotations

import time

from inferlab.engines.endpoint.fidelity import fidelity_figures
from inferlab.engines.labs.batching.traces_bench import run_traces_bench as batching_figures
from inferlab.engines.labs.cluster.autoscale_bench import autoscale_figures

GOALS = {"csv_rows_per_s": ">= 300,000", "mooncake_simulated_requests_per_s_of_wall": ">= 1,500",
         "fidelity_ttft_median_error": "<= 0.15", "fidelity_e2e_median_error": "<= 0.15",
         "autoscale_gpu_hours_vs_peak_fleet": "reported, with both SLO attainments"}


def run_traces_bench() -> dict:
    figures: dict = {"goals": GOALS}
    for part, run in (("batching", batching_figures), ("autoscale", autoscale_figures),
                      ("fidelity", fidelity_figures)):
        t0 = time.perf_counter()
        figures.update(run())
        figures[f"{part}_part_wall_s"] = time.perf_counter() - t0
    return figures
