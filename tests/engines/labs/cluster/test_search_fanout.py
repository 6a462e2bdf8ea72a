"""`inferlab run cluster --search` on Ray, serially, or serially because ray is missing: the
output says which executor ran the probes, the options are checked, and the terminal's
progress counts the probes."""

from __future__ import annotations

import argparse
import sys

import pytest

from inferlab.engines.cluster.ray_bench import ray_search_speedup
from inferlab.engines.labs.cluster import run as cluster_run
from inferlab.engines.trace.recorder import TraceRecorder


def run_args(*argv):
    p = argparse.ArgumentParser()
    cluster_run.add_arguments(p)
    return p.parse_args(["--requests", "30", "--rate", "20", "--gpus", "4", *argv])


def search(*argv):
    args = run_args("--search", "pd", *argv)
    told = []
    args.progress = lambda fraction, message: told.append((fraction, message))
    return cluster_run.run(args, TraceRecorder())[1], told


def test_without_ray_the_search_says_it_ran_serially(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    summary, told = search()
    assert summary["executor"] == "serial (ray not installed)"
    n = len(summary["cells"])
    assert told[-1] == (1.0, f"{n}/{n} layouts probed, serial (ray not installed)")
    with pytest.raises(ValueError, match="needs ray: pip install 'inferlab\\[cluster\\]'"):
        search("--ray-address", "10.0.0.1:6379")


def test_the_options_are_checked():
    with pytest.raises(ValueError, match="--workers must be at least 1"):
        search("--workers", "0")
    with pytest.raises(ValueError, match="--serial and --ray-address exclude"):
        search("--serial", "--ray-address", "10.0.0.1:6379")


@pytest.mark.slow
def test_on_ray_the_search_equals_the_serial_one():
    pytest.importorskip("ray")
    serial, _ = search("--serial")
    on_ray, told = search("--workers", "2")
    assert on_ray["executor"] == "ray (local, 2 workers)" and serial["executor"] == "serial"
    assert {k: v for k, v in on_ray.items() if k != "executor"} == {
        k: v for k, v in serial.items() if k != "executor"}
    n = len(serial["cells"])
    assert [m for _, m in told[1:]] == [
        f"{k}/{n} layouts probed, ray (local, 2 workers)" for k in range(1, n + 1)]


@pytest.mark.slow
def test_the_speedup_bench_times_both_and_finds_the_same_result():
    pytest.importorskip("ray")
    out = ray_search_speedup(workers=2, kind="replicas", model_config="llama-3-8b",
                             hardware="h100-sxm", budget=2, requests=20)
    assert out["probes"] == 3 and out["same_result"] is True
    assert out["executor"] == "ray (local, 2 workers)"
    assert out["speedup"] == out["serial_s"] / out["ray_s"]
    assert out["ray_init_s"] > 0 and out["serial_s"] > 0
