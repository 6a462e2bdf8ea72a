"""The autoscaling bench's figures on a minute of the shipped trace (the whole window is
`inferlab bench traces`' job): named, consistent with each other."""

import pytest

from inferlab.engines.labs.cluster.autoscale_bench import autoscale_figures


def test_autoscale_figures_on_a_minute_of_the_shipped_trace():
    got = autoscale_figures(window="0:60")
    assert got["autoscale_gpu_hours_vs_peak_fleet"] == pytest.approx(
        got["autoscale_gpu_hours"] / got["peak_fleet_gpu_hours"])
    for key in ("autoscale_slo_attainment", "peak_fleet_slo_attainment"):
        assert 0.0 <= got[key] <= 1.0
    assert 1 <= got["peak_fleet_replicas"] <= 8
    assert got["autoscale_peak_replicas"] >= 2  # min_replicas
    assert got["autoscale_trace_requests"] == 191  # the rows of the first minute (0.25 time scale)
    assert got["autoscale_cold_start_s"] == pytest.approx(47.64, abs=0.01)
