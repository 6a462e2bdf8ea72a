"""The batching bench: its figures are there, finite and positive (no timing asserts)."""

from __future__ import annotations

import math

KEYS = ("throughput_ratio", "continuous_ttft_p99_s", "static_ttft_p99_s",
        "continuous_tpot_p99_s", "static_tpot_p99_s", "simulated_requests_per_s_of_wall")


def test_engine_bench_figures_are_finite_and_positive():
    from inferlab.engines.servelab.bench import run_batching_bench

    figures = run_batching_bench(requests=40, simulator_requests=50)
    for key in KEYS:
        assert math.isfinite(figures[key]) and figures[key] > 0, key


def test_lab_bench_adds_the_timeline_render(qtbot):
    from inferlab.app.benches.batching import run_batching_lab_bench

    figures = run_batching_lab_bench(requests=20, simulator_requests=20, timeline_requests=50,
                                     timeline_iterations=200)
    for key in (*KEYS, "timeline_render_ms"):
        assert math.isfinite(figures[key]) and figures[key] > 0, key
