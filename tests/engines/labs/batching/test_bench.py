"""The batching bench: its figures are there, finite and positive (no timing asserts)."""

from __future__ import annotations

import math

import pytest

KEYS = ("throughput_ratio", "continuous_ttft_p99_s", "static_ttft_p99_s",
        "continuous_tpot_p99_s", "static_tpot_p99_s", "simulated_requests_per_s_of_wall")


@pytest.mark.slow  # a whole bench run
def test_engine_bench_figures_are_finite_and_positive():
    from inferlab.engines.labs.batching.bench import run_batching_bench

    figures = run_batching_bench(requests=40, simulator_requests=50, real=False)
    for key in (*KEYS, "scheduler_overhead_frac"):
        assert math.isfinite(figures[key]) and figures[key] > 0, key
    assert figures["scheduler_overhead_frac"] < 1
    assert figures["scheduler_overhead_iterations"] > 0


@pytest.mark.slow  # a whole bench run
def test_calibration_compares_every_iteration_of_a_wall_run():
    from inferlab.engines.labs.batching.bench import cost_model_calibration

    figures = cost_model_calibration("tiny", requests=6, quick_roofs=True)
    by_kind = figures["cost_model_errors_by_kind"]
    assert by_kind["all"]["iterations"] == sum(
        v["iterations"] for k, v in by_kind.items() if k != "all")
    assert by_kind["all"]["median"] == figures["cost_model_error_median"] >= 0
    assert figures["cost_model_error_p90"] >= figures["cost_model_error_median"]


def test_prediction_errors_on_hand_worked_iterations():
    from inferlab.engines.serve.calibration import Prediction, iteration_kind, prediction_errors

    assert iteration_kind(0, 5) == "decode-only"
    assert iteration_kind(10, 10) == "prefill-heavy" and iteration_kind(3, 10) == "mixed"
    preds = [Prediction("decode-only", 0, 4, 0.5, 1.0), Prediction("decode-only", 0, 4, 3.0, 2.0),
             Prediction("mixed", 2, 8, 1.0, 1.0)]
    errors = prediction_errors(preds)
    assert errors["decode-only"]["median"] == 0.5 and errors["mixed"]["median"] == 0.0
    assert errors["all"]["iterations"] == 3 and errors["all"]["median"] == 0.5
    assert errors["all"]["p90"] == 0.5  # numpy's linear percentile of 0, 0.5, 0.5
    assert errors["decode-only"]["predicted_over_measured_median"] == 1.0
    assert "prefill-heavy" not in errors
