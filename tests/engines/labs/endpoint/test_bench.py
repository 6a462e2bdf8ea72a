"""The benches, small: the client-overhead bench against its own fake-server process, and the
guidellm-style sweep (synchronous, throughput, constant rates between) with its knee."""

from __future__ import annotations

from inferlab.engines.endpoint.sweep import between
from inferlab.engines.labs.endpoint.bench import client_overhead, fake_sweep


def test_between_spaces_rates_evenly_inside():
    assert between(1.0, 5.0, 3) == [2.0, 3.0, 4.0]
    assert between(2.0, 2.0, 3) == [] and between(1.0, 5.0, 0) == []


def test_client_overhead_bench_small():
    out = client_overhead(streams=20, rounds=1, output_tokens=10, token_interval_s=0.01)
    assert (out["completed"], out["failed"], out["chunks"]) == (20, 0, 200)
    assert out["cpu_s"] > 0 and out["cpu_cores_per_100_streams"] > 0


def test_fake_sweep_points_and_knee():
    out = fake_sweep(n_requests=12, output_tokens=8, token_interval_s=0.005, n_rates=2)
    points = out["points"]
    assert [p["strategy"] for p in points] == ["synchronous", "throughput", "constant",
                                               "constant"]
    assert all(p["completed"] == 12 and p["failed"] == 0 for p in points)
    sync, best = points[0]["rate_per_s"], points[1]["rate_per_s"]
    assert sync < points[2]["rate_per_s"] < points[3]["rate_per_s"] < best
    assert out["knee"] is not None and out["knee"]["rate_per_s"] == max(
        p["rate_per_s"] for p in points if p["ttft_p99_s"] <= 0.5
        and (p["tpot_p99_s"] or 0) <= 0.05)
