"""An autoscaled replicas fleet on the simulated clock (autoscaled.py): cold start, bounds,
settling, draining, and for any arrivals every request finishing exactly once."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab.engines.cluster.autoscale import AutoscalePolicy
from inferlab.engines.cluster.autoscaled import run_autoscaled
from inferlab.engines.cluster.cluster import ClusterConfig, run_cluster
from inferlab.engines.cluster.goodput import slo_attainment
from inferlab.engines.cluster.layout import Layout
from inferlab.engines.cluster.links import load_link_preset
from inferlab.engines.cluster.peak_fleet import AT_MAX, SMALLEST, fixed_fleet_gpu_hours, peak_fleet
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import requests_from_workload
from inferlab.engines.serve.metrics import SLO
from inferlab.engines.serve.workload import WorkloadRequest

CFG = load_model_preset("llama-3.2-1b")
H100 = load_hardware_preset("h100-sxm")
NVLINK = load_link_preset("nvlink4")
SLOW = ClusterConfig(load_model_preset("llama-3-8b"), load_hardware_preset("l4"), NVLINK,
                     Layout("replicas", tp=1, replicas=1))  # ~50 ms a decode step


def config(replicas=1, **kw):
    return ClusterConfig(CFG, H100, NVLINK, Layout("replicas", tp=1, replicas=replicas),
                         router="least-tokens", **kw)


def requests(rows):
    """rows: (arrival_s, prompt_tokens, output_tokens)."""
    return requests_from_workload([WorkloadRequest(a, p, o) for a, p, o in rows],
                                  CFG.vocab_size)


def check_each_request_finished_once(result, reqs):
    assert sorted(r.request_id for r in result.requests) == sorted(r.request_id for r in reqs)
    for r in result.requests:
        assert len(r.token_times_s) == r.max_new_tokens
        assert list(r.token_times_s) == sorted(r.token_times_s)
    held = [rid for inst in result.instances for rid in (x.request_id for x in inst.requests)]
    assert sorted(held) == sorted(r.request_id for r in reqs)  # on exactly one instance


def test_cold_start_delays_the_first_request_of_a_new_replica_by_exactly_the_cold_start():
    reqs = requests([(0.0, 300, 20)])
    warm = run_cluster(config(), reqs).requests[0]
    cold_s = 37.5
    got = run_autoscaled(config(), reqs, AutoscalePolicy(4, 0, 2), cold_s)
    cold = got.requests[0]
    assert [t - cold_s for t in cold.token_times_s] == pytest.approx(list(warm.token_times_s),
                                                                     abs=1e-9)
    (life,) = got.autoscale.replicas
    assert (life.started_s, life.ready_s) == (0.0, cold_s)
    # it held its GPU from the tick that asked for it to the last token
    assert got.autoscale.gpu_hours == pytest.approx(cold.token_times_s[-1] / 3600)


def test_a_replica_started_mid_run_serves_nothing_before_its_cold_start_ends():
    # a steady trickle, then long requests arriving fast: the autoscaler asks for more
    rows = [(0.5 * i, 200, 40) for i in range(20)] + [(10.0 + 0.3 * i, 400, 1500)
                                                       for i in range(60)]
    reqs = requests(rows)
    got = run_autoscaled(config(), reqs, AutoscalePolicy(1, 1, 6), 5.0)
    lives = got.autoscale.replicas
    started = [life for life in lives[1:] if life.ready_s is not None]
    assert started
    for life in started:
        inst = got.instances[life.index]
        assert life.ready_s == pytest.approx(life.started_s + 5.0)
        assert all(it.start_s >= life.ready_s for it in inst.iterations)
        assert all(r.arrival_s >= life.ready_s for r in inst.requests)  # routed once ready
    assert any(got.instances[life.index].requests for life in started)
    check_each_request_finished_once(got, reqs)


def test_replicas_stay_within_min_and_max():
    rows = [(0.05 * i, 500, 1000) for i in range(200)]
    policy = AutoscalePolicy(2, 2, 3)
    got = run_autoscaled(config(), requests(rows), policy, 1.0)
    ticks = got.autoscale.ticks
    assert all(2 <= t.desired <= 3 for t in ticks)
    assert all(t.ready + t.booting <= 3 for t in ticks)
    assert max(t.ready for t in ticks) == 3  # the load asks for more than the max
    assert min(t.ready + t.booting for t in ticks) >= 2


def test_constant_concurrency_of_k_targets_settles_the_fleet_at_k():
    # 12 long requests at once (an 8B model on an L4: ~50 ms a step): 12 in flight for a
    # couple of minutes; target 4 → 3 replicas
    reqs = requests_from_workload([WorkloadRequest(0.0, 100, 3000)] * 12,
                                  SLOW.model.vocab_size)
    got = run_autoscaled(SLOW, reqs, AutoscalePolicy(4, 1, 8), 1.0)
    end = min(r.token_times_s[-1] for r in got.requests)
    steady = [t for t in got.autoscale.ticks if 4.0 <= t.t_s < end]
    assert len(steady) > 10
    assert all(t.in_flight == 12 and t.desired == 3 and t.ready == 3 for t in steady)


def test_draining_loses_no_request_and_gives_the_replica_back_when_its_own_are_done():
    # 40 requests of 200 to 1,500 tokens over 20 s (an 8B model on an L4) fill 4 replicas;
    # as they finish the autoscaler drains replicas that still hold some
    reqs = requests_from_workload([WorkloadRequest(0.5 * i, 300, 200 + (i * 337) % 1300)
                                   for i in range(40)], SLOW.model.vocab_size)
    got = run_autoscaled(SLOW, reqs, AutoscalePolicy(4, 1, 4, stable_window_s=10.0,
                                                     panic_window_s=2.0), 2.0)
    check_each_request_finished_once(got, reqs)
    drained = [life for life in got.autoscale.replicas if life.drain_s is not None]
    assert drained
    busy = [life for life in drained if life.removed_s > life.drain_s]
    assert busy, "some replica drained with requests still running"
    for life in drained:
        inst = got.instances[life.index]
        # nothing routed to it after the drain began; given back at its last iteration
        assert all(r.arrival_s <= life.drain_s for r in inst.requests)
        if inst.iterations and life.removed_s > life.drain_s:
            assert life.removed_s == pytest.approx(max(it.end_s for it in inst.iterations))


ROWS = st.lists(st.tuples(st.floats(0, 60), st.integers(1, 300), st.integers(1, 60)),
                min_size=1, max_size=30).map(lambda rs: sorted(rs))
POLICIES = st.builds(
    lambda lo, extra, target, tick, stable, delay: AutoscalePolicy(
        target, lo, max(1, lo + extra), stable_window_s=stable,
        panic_window_s=stable / 10, scale_down_delay_s=delay, tick_s=tick),
    st.integers(0, 2), st.integers(0, 3), st.floats(0.5, 8), st.floats(0.5, 4),
    st.floats(6, 60), st.sampled_from([0.0, 5.0]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ROWS, POLICIES, st.sampled_from([0.0, 0.5, 7.0]))
def test_any_arrivals_finish_once_within_the_replica_bounds(rows, policy, cold_s):
    reqs = requests(rows)
    got = run_autoscaled(config(), reqs, policy, cold_s)
    check_each_request_finished_once(got, reqs)
    run = got.autoscale
    for t in run.ticks:
        assert policy.min_replicas <= t.desired <= policy.max_replicas
        assert t.ready + t.booting <= policy.max_replicas
    for life in run.replicas:
        inst = got.instances[life.index]
        if life.ready_s is None:
            assert not inst.requests  # dropped while cold: never served
            continue
        assert all(it.start_s >= life.ready_s for it in inst.iterations)
        if life.removed_s is not None:
            assert all(it.end_s <= life.removed_s + 1e-9 for it in inst.iterations)
    assert run.gpu_hours >= 0


def test_peak_fleet_is_the_smallest_fixed_fleet_a_linear_scan_finds():
    reqs = requests_from_workload([WorkloadRequest(0.2 * i, 1000, 100 + (i * 53) % 300)
                                   for i in range(60)], SLOW.model.vocab_size)
    slo = SLO(ttft_s=2.0, tpot_s=0.1)
    scan = {}
    for n in range(1, 6):
        fixed = run_cluster(dataclasses.replace(SLOW, layout=Layout("replicas", replicas=n)),
                            reqs)
        scan[n] = (slo_attainment(fixed.timings(), slo), fixed_fleet_gpu_hours(fixed))
    goal = 0.9
    want = min(n for n, (got, _) in scan.items() if got >= goal)
    assert want > 1, "the test needs a load one replica cannot serve"
    peak = peak_fleet(SLOW, reqs, slo, goal, 5)
    assert (peak.replicas, peak.basis) == (want, SMALLEST)
    assert (peak.attainment, peak.gpu_hours) == pytest.approx(scan[want])
    last = run_cluster(dataclasses.replace(SLOW, layout=Layout("replicas", replicas=want)),
                       reqs)
    end = max(r.token_times_s[-1] for r in last.requests)
    assert scan[want][1] == pytest.approx(want * (end - 0.0) / 3600)  # n GPUs, arrival 0 on
    capped = peak_fleet(SLOW, reqs, slo, goal, want - 1)
    assert (capped.replicas, capped.basis) == (want - 1, AT_MAX)
