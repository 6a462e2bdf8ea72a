"""Policies side by side and the rate sweep (engines/labs/batching/compare.py), simulated clock."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.engines.hardware.cancel import Cancelled
from inferlab.engines.labs.batching.compare import (
    compare_policies,
    latency_cdf,
    rate_sweep,
    sweep_rates,
    variant_label,
    varied_keys,
)
from inferlab.engines.labs.batching.compare_records import (
    SweepPoint,
    comparison_state,
    read_comparison_state,
)
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.serve.metrics import knee

SMALL = dict(BATCHING_DEFAULTS, requests=40, rate_per_s=10.0)


def test_both_policies_run_the_same_requests():
    messages = []
    static, continuous = compare_policies(SMALL, progress=lambda f, m: messages.append((f, m)))
    assert (static.policy, continuous.policy) == ("static", "continuous")
    for run in (static, continuous):
        assert run.metrics["completed"] == 40 == len(run.ttft_s)
        assert 0 < len(run.tpot_s) <= 40 and all(t > 0 for t in run.tpot_s)
    assert static.metrics["total_output_tokens"] == continuous.metrics["total_output_tokens"]
    # the point of the lab, on this seeded workload: continuous answers sooner
    assert np.median(continuous.ttft_s) < np.median(static.ttft_s)
    assert messages[0][0] == 0.0 and messages[-1] == (1.0, "compared")


def test_latency_cdf_by_hand():
    x, y = latency_cdf([0.3, 0.1, 0.2, 0.2])
    assert x.tolist() == [0.1, 0.2, 0.2, 0.3] and y.tolist() == [0.25, 0.5, 0.75, 1.0]
    x, y = latency_cdf([])
    assert len(x) == len(y) == 0


def test_sweep_rates_are_log_spaced_and_checked():
    assert sweep_rates(1, 100, 3) == pytest.approx([1, 10, 100])
    assert sweep_rates(5, 5, 1) == [5.0]
    for bad in ((0, 1, 3), (2, 1, 3), (1, 2, 0), (1, 2, 1000)):
        with pytest.raises(ValueError, match="rates"):
            sweep_rates(*bad)


def test_a_rate_sweep_gives_one_point_per_rate_and_policy():
    points = rate_sweep(dict(SMALL, requests=30), [2.0, 20.0])
    assert [(p.policy, p.rate_per_s) for p in points] == [
        ("static", 2.0), ("continuous", 2.0), ("static", 20.0), ("continuous", 20.0)]
    for p in points:
        assert 0 < p.ttft_p50_s <= p.ttft_p99_s and 0 < p.tpot_p50_s <= p.tpot_p99_s
    by = {(p.policy, p.rate_per_s): p for p in points}
    # more offered load, more delivered tokens per second (the same requests, sooner)
    assert by["continuous", 20.0].output_tokens_per_s > by["continuous", 2.0].output_tokens_per_s


def test_the_knee_is_the_highest_rate_meeting_both_slos():
    def point(rate, ttft, tpot):
        return SweepPoint("continuous", rate, rate * 100, ttft / 2, ttft, tpot / 2, tpot, rate)

    points = [point(1, 0.1, 0.01), point(2, 0.5, 0.02), point(4, 0.9, 0.06), point(8, 3.0, 0.02)]
    assert knee(points, "continuous", 1.0, 0.05).rate_per_s == 2
    assert knee(points, "continuous", 1.0, 0.1).rate_per_s == 4
    assert knee(points, "continuous", 0.01, 0.05) is None
    assert knee(points, "static", 1.0, 0.05) is None


def test_a_sweep_stops_when_asked():
    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 3

    with pytest.raises(Cancelled):
        rate_sweep(SMALL, [1.0, 2.0, 4.0], should_stop=stop)


def test_the_comparison_state_round_trips_and_refuses_bad_fields():
    import json

    runs = compare_policies(dict(SMALL, requests=8))
    points = rate_sweep(dict(SMALL, requests=8), [5.0])
    state = json.loads(json.dumps(comparison_state(runs, points)))
    back_runs, back_points = read_comparison_state(state)
    assert [r.to_dict() for r in back_runs] == [r.to_dict() for r in runs]
    assert back_points == points
    assert read_comparison_state({}) == ([], [])
    assert comparison_state([], []) == {}
    bad = [
        ({"comparison": [state["comparison"][0]]}, "expected two runs"),
        ({"sweep": [dict(state["sweep"][0], policy="fifo")]}, r"sweep\[0\]: policy"),
        ({"sweep": [dict(state["sweep"][0], ttft_p99_s=float("nan"))]}, "ttft_p99_s"),
        ({"sweep": [dict(state["sweep"][0], extra=1)]}, "unknown field 'extra'"),
        ({"comparison": [dict(state["comparison"][0], ttft_s=[0.1, -1]),
                         state["comparison"][1]]}, r"ttft_s\[1\]: expected a finite number >= 0"),
        ({"comparison": "both"}, "comparison: expected a list"),
        ({"comparison": [dict(state["comparison"][0], prefix_cache="lru"),
                         state["comparison"][1]]}, r"comparison\[0\]: prefix_cache"),
        ({"sweep": [dict(state["sweep"][0], schedule="sjf")]}, r"sweep\[0\]: schedule"),
    ]
    for raw, message in bad:
        with pytest.raises(ValueError, match=message):
            read_comparison_state(raw)


def test_a_snapshot_from_before_the_prefix_choice_reads_as_block_hashes_and_fcfs():
    runs = compare_policies(dict(SMALL, requests=8))
    points = rate_sweep(dict(SMALL, requests=8), [5.0], ("continuous",))
    state = comparison_state(runs, points)
    for item in (*state["comparison"], *state["sweep"]):
        del item["prefix_cache"], item["schedule"]
    back_runs, back_points = read_comparison_state(state)
    assert {(r.prefix_cache, r.schedule) for r in (*back_runs, *back_points)} == {
        ("hash", "fcfs")}


def test_hash_and_radix_compare_on_the_same_multi_turn_requests():
    """Two prefix caches, one policy, the same scenario: radix finds at least every token the
    block hashes find (token granularity), both serve every request, and the progress names
    the runs by what differs."""
    messages = []
    settings = dict(BATCHING_DEFAULTS, scenario="multi-turn")
    hashed, radix = compare_policies(settings, ({"prefix_cache": "hash"},
                                                {"prefix_cache": "radix"}),
                                     progress=lambda f, m: messages.append(m))
    assert (hashed.prefix_cache, radix.prefix_cache) == ("hash", "radix")
    assert hashed.policy == radix.policy == "continuous"
    assert hashed.metrics["completed"] == radix.metrics["completed"] > 0
    assert hashed.metrics["total_output_tokens"] == radix.metrics["total_output_tokens"]
    assert radix.metrics["prefix_hit_rate"] > hashed.metrics["prefix_hit_rate"] > 0
    assert messages[:2] == ["running hash (1/2)", "running radix (2/2)"]
    off, = compare_policies(settings, ({"prefix_cache": "none"},))
    assert off.metrics["prefix_hit_rate"] == 0
    with pytest.raises(ValueError, match="'clock' is not one of"):
        compare_policies(settings, ({"clock": "wall"},))


def test_a_sweep_runs_the_variants_it_is_given():
    points = rate_sweep(dict(SMALL, requests=10), [5.0], ({"schedule": "fcfs"},
                                                          {"schedule": "lpm"}))
    assert [(p.policy, p.schedule) for p in points] == [("continuous", "fcfs"),
                                                        ("continuous", "lpm")]


def test_variant_names_say_what_differs():
    a = {"policy": "continuous", "prefix_cache": "hash", "schedule": "fcfs"}
    b = dict(a, prefix_cache="radix", schedule="lpm")
    assert varied_keys([a, b]) == ["prefix_cache", "schedule"]
    assert variant_label(b, varied_keys([a, b])) == "radix · lpm"
    assert variant_label(a, varied_keys([a, a])) == "continuous"
