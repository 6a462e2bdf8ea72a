"""`inferlab run cluster --trace` (the batching lab's window, time scale and sample) and
`--autoscale` (replicas over time, GPU-hours beside the peak fleet), headless."""

from __future__ import annotations

import argparse
import importlib.resources
import json
from datetime import datetime

import pytest

from inferlab.engines.labs.cluster import run as cluster_run
from inferlab.engines.labs.cluster.section import read_cluster_section
from inferlab.engines.trace.recorder import TraceRecorder

AZURE = importlib.resources.files("inferlab.assets") / "traces" / \
    "azure_conv_2023_first20min.csv"


def run(*argv):
    p = argparse.ArgumentParser()
    cluster_run.add_arguments(p)
    with importlib.resources.as_file(AZURE) as path:
        return cluster_run.run(p.parse_args(["--trace", str(path), *argv]), TraceRecorder())


def azure_rows() -> list[tuple[float, int, int]]:
    """The shipped file's rows read here by hand: (seconds after the first, in, out)."""
    lines = AZURE.read_text(encoding="utf-8").splitlines()[1:]
    stamps = [datetime.strptime(line.split(",")[0][:26], "%Y-%m-%d %H:%M:%S.%f")
              for line in lines]
    return [((t - stamps[0]).total_seconds(), int(line.split(",")[1]),
             int(line.split(",")[2])) for t, line in zip(stamps, lines, strict=True)]


def test_a_trace_window_runs_exactly_the_rows_of_the_window_shifted_to_zero():
    _, summary = run("--window", "60:90", "--layout", "replicas", "--gpus", "2")
    want = [(t - 60.0, i, o) for t, i, o in azure_rows() if 60.0 <= t < 90.0]
    got = sorted((r["arrival_s"], r["prompt_tokens"], len(r["token_times_s"]))
                 for r in summary["requests"])
    assert len(got) == len(want) == summary["trace_requests"] > 50
    for (ta, ia, oa), (tb, ib, ob) in zip(got, sorted(want), strict=True):
        assert ta == pytest.approx(tb, abs=1e-6) and (ia, oa) == (ib, ob)
    assert summary["trace_format"] == "azure" and summary["trace_requests_empty"] == 0
    assert summary["trace_hit_rate_unbounded"] == 0.0  # Azure's trace has no block ids
    # --time-scale 2: the same requests, their gaps twice as long
    _, slow = run("--window", "60:90", "--time-scale", "2", "--layout", "replicas",
                  "--gpus", "2")
    assert sorted(r["arrival_s"] for r in slow["requests"]) == pytest.approx(
        [2 * t for t, _, _ in sorted(want)])
    _, few = run("--window", "60:90", "--sample", "10", "--layout", "replicas")
    assert len(few["requests"]) == 10


def test_autoscale_prints_replicas_over_time_and_gpu_hours_beside_the_peak_fleet():
    section, summary = run("--window", "0:120", "--autoscale", "--target-concurrency", "2",
                           "--max-replicas", "4", "--cold-start-s", "10")
    for key in ("replicas_over_time", "gpu_hours", "slo_attainment", "peak_fleet",
                "autoscale_gpu_hours_vs_peak_fleet"):
        assert key in summary
    ticks = summary["replicas_over_time"]
    assert ticks[0][0] == 0.0 and all(b[0] - a[0] == pytest.approx(2.0)
                                      for a, b in zip(ticks, ticks[1:], strict=False))
    assert all(1 <= serving <= held <= 4 for _, serving, held, _ in ticks)
    assert max(serving for _, serving, _, _ in ticks) > 1  # the load asked for more
    lives = summary["autoscale"]["replicas"]
    end = max(r["token_times_s"][-1] for r in summary["requests"])
    held_s = sum((end if x["removed_s"] is None else x["removed_s"]) - x["started_s"]
                 for x in lives)
    assert summary["gpu_hours"] == pytest.approx(held_s / 3600)
    assert all(x["ready_s"] is None or x["ready_s"] - x["started_s"] == pytest.approx(10.0)
               for x in lives[1:])
    peak = summary["peak_fleet"]
    assert 1 <= peak["replicas"] <= 4 and peak["gpu_hours"] > 0
    assert summary["autoscale_gpu_hours_vs_peak_fleet"] == pytest.approx(
        summary["gpu_hours"] / peak["gpu_hours"])
    record = read_cluster_section(json.loads(json.dumps(section)))
    assert record.state.autoscale is not None
    assert record.metrics["autoscale"]["peak_fleet"]["replicas"] == peak["replicas"]
    assert [[t.t_s, t.ready, t.ready + t.booting + t.draining, t.in_flight]
            for t in record.state.autoscale.ticks] == ticks


@pytest.mark.parametrize("argv, message", [
    (["--autoscale", "--layout", "pd"], "--autoscale: autoscaling scales a replicas layout"),
    (["--autoscale", "--min-replicas", "5", "--max-replicas", "2"], "--max-replicas"),
    (["--window", "2000:3000"], "holds no request"),
    (["--window", "a:b"], "--window must be START:END"),
])
def test_bad_options_are_named(argv, message):
    with pytest.raises(ValueError, match=message):
        run(*argv)
