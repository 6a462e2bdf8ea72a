"""The cluster on the simulated clock against the one-GPU batching lab, the link formulas
and the batching lab's metric definitions."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.cluster.cluster import ClusterConfig, instance_pool_blocks, run_cluster
from inferlab.engines.cluster.executor import InstanceExecutor
from inferlab.engines.cluster.layout import PD, REPLICAS, TP, Layout, layout_for
from inferlab.engines.cluster.links import list_link_presets, load_link_preset
from inferlab.engines.cluster.router import ROUTERS
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.roofline.interconnect import kv_transfer_s
from inferlab.engines.roofline.memory import kv_bytes_per_token
from inferlab.engines.serve.engine import ServingEngine, requests_from_workload
from inferlab.engines.serve.executors import SimulatedExecutor, simulated_pool_blocks
from inferlab.engines.serve.metrics import SLO, RequestTiming, summarize
from inferlab.engines.serve.scheduler import Scheduler
from inferlab.engines.serve.workload import LengthDist, Workload, generate

CFG = load_model_preset("llama-3-8b")
H100 = load_hardware_preset("h100-sxm")
NVLINK = load_link_preset("nvlink4")
L4 = load_hardware_preset("l4")


def workload(n=60, rate=40.0, seed=0, prompt_mean=6.0, output_mean=4.0):
    items = generate(Workload(n_requests=n, rate_per_s=rate, seed=seed,
                              prompt_len=LengthDist.lognormal(prompt_mean, 0.5),
                              output_len=LengthDist.lognormal(output_mean, 0.5)))
    return requests_from_workload(items, CFG.vocab_size)


def config(layout, **kw):
    return ClusterConfig(CFG, H100, NVLINK, layout, **kw)


def test_link_presets_load_with_sources():
    ids = list_link_presets()
    assert {"nvlink4", "pcie5-x16", "infiniband-400g", "ethernet-100g"} <= set(ids)
    speeds = {i: load_link_preset(i).bandwidth_bytes_per_s for i in ids}
    assert speeds["nvlink4"] > speeds["pcie5-x16"] > speeds["ethernet-100g"]
    assert all(load_link_preset(i).source for i in ids)


def test_one_instance_is_the_batching_labs_run_record_for_record():
    requests = workload()
    blocks = BlockManager(simulated_pool_blocks(CFG, H100, 16), 16, prefix_cache="hash")
    alone = ServingEngine(Scheduler("continuous", blocks, max_num_batched_tokens=2048,
                                    max_num_seqs=128), SimulatedExecutor(CFG, H100), requests)
    while not alone.done:
        alone.step()
    result = run_cluster(config(Layout(REPLICAS)), requests)
    (inst,) = result.instances
    assert inst.kv_total_blocks == blocks.n_blocks
    assert [r.to_dict() for r in inst.iterations] == [r.to_dict() for r in alone.records]
    by_id = {s.request.request_id: s for s in alone.scheduler.seqs.values()}
    for r in result.requests:
        assert r.token_times_s == tuple(by_id[r.request_id].token_times_s)
        assert r.instance == 0 and r.decode_instance is None and r.kv_transfer_s == 0.0


def test_tp_one_adds_no_communication():
    requests = workload(n=20)
    result = run_cluster(config(Layout(REPLICAS, replicas=2)), requests)
    assert all(inst.comm_s == 0.0 for inst in result.instances)
    tp2 = run_cluster(config(Layout(TP, tp=2)), requests)
    assert tp2.instances[0].comm_s > 0


def test_tp_iteration_is_the_roofline_on_t_gpus_plus_two_all_reduces_per_layer():
    from inferlab.engines.serve.scheduler import PrefillChunk, SchedulerOutput

    base = SimulatedExecutor(CFG, H100)
    tp = InstanceExecutor(CFG, H100, tp=4, link=NVLINK)
    out = SchedulerOutput("continuous", 0.0, (PrefillChunk("a", 0, 512),), (), (), ("a",), 512)
    tokens, act_bytes = 512, CFG.d_model * 2
    ring_s = 2 * 3 / 4 * tokens * act_bytes / NVLINK.bandwidth_bytes_per_s + NVLINK.latency_s
    seqs = {}
    got = tp.iteration_time_s(out, seqs)
    compute = base.batch_time_s([(0, 512)], 0, 0) / 4  # four GPUs: every roof × 4
    assert got == pytest.approx(compute + 2 * CFG.n_layers * ring_s, rel=1e-9)


def test_pd_transfer_is_the_formula_and_each_request_decodes_after_its_kv_lands():
    requests = workload(n=30, prompt_mean=7.0)
    for overlap in (False, True):
        result = run_cluster(config(Layout(PD, prefill=1, decode=1), overlap_transfer=overlap),
                             requests)
        kvb = kv_bytes_per_token(CFG, "fp16")
        assert result.kv_bytes_per_token == kvb
        spans = {s.request_id: s for s in result.transfers}
        for r in result.requests:
            assert r.instance == 0
            if r.max_new_tokens < 2:
                assert r.decode_instance is None and r.request_id not in spans
                continue
            assert r.decode_instance == 1
            assert r.kv_transfer_s == pytest.approx(kv_transfer_s(
                kvb, r.prompt_tokens, NVLINK.bandwidth_bytes_per_s, NVLINK.latency_s))
            assert len(r.token_times_s) == r.max_new_tokens
            first, second = r.token_times_s[0], r.token_times_s[1]
            landed = spans[r.request_id].end_s
            assert first < landed <= second
            if not overlap:  # sent whole after the prefill: lands one transfer later
                assert landed == pytest.approx(first + r.kv_transfer_s)


def test_overlapping_the_transfer_never_lands_it_later():
    requests = workload(n=30, prompt_mean=7.5)
    whole = run_cluster(config(Layout(PD, prefill=1, decode=1), overlap_transfer=False),
                        requests)
    overlapped = run_cluster(config(Layout(PD, prefill=1, decode=1)), requests)
    w = {s.request_id: s.end_s - s.start_s for s in whole.transfers}
    for s in overlapped.transfers:
        assert s.end_s - s.start_s <= w[s.request_id] + 1e-12


@settings(max_examples=20, deadline=None)
@given(router=st.sampled_from(ROUTERS), replicas=st.integers(1, 4), seed=st.integers(0, 99),
       kind=st.sampled_from([REPLICAS, PD]))
def test_every_request_is_routed_once_and_completes(router, replicas, seed, kind):
    requests = workload(n=25, rate=80.0, seed=seed, prompt_mean=5.0, output_mean=3.0)
    layout = (Layout(REPLICAS, replicas=replicas) if kind == REPLICAS
              else Layout(PD, prefill=replicas, decode=max(1, 5 - replicas)))
    # an L4's pool (2,641 blocks, not an H100's 26,674): the same routing, a tenth of the
    # blocks to build for every instance of every example
    small = ClusterConfig(CFG, L4, NVLINK, layout, router=router)
    result = run_cluster(small, requests)
    assert sorted(r.request_id for r in result.requests) == sorted(
        r.request_id for r in requests)
    seen = [info.request_id for inst in result.instances if inst.role != "decode"
            for info in inst.requests]
    assert sorted(seen) == sorted(r.request_id for r in requests)  # exactly once
    for r in result.requests:
        assert len(r.token_times_s) == r.max_new_tokens
        assert list(r.token_times_s) == sorted(r.token_times_s)
        assert r.token_times_s[0] > r.arrival_s


def test_metrics_recomputed_from_token_times_equal_the_reported():
    requests = workload(n=40)
    result = run_cluster(config(Layout(PD, prefill=1, decode=2)), requests)
    slo = SLO(ttft_s=0.5, tpot_s=0.05)
    reported = result.metrics(slo)
    timings = [RequestTiming(r.arrival_s, list(r.token_times_s), r.prompt_tokens)
               for r in result.requests]
    again = summarize(timings, slo=slo)
    assert again.to_dict() == reported.to_dict()
    ttfts = [r.token_times_s[0] - r.arrival_s for r in result.requests]
    assert reported.ttft_s.mean == pytest.approx(sum(ttfts) / len(ttfts))
    assert reported.completed == len(requests)


def test_prefix_router_finds_the_replica_that_holds_the_conversation():
    from inferlab.engines.serve.prefix_workloads import make_scenario

    items = make_scenario("multi-turn", seed=0, n=16)
    requests = requests_from_workload(items, CFG.vocab_size)
    rr = run_cluster(config(Layout(REPLICAS, replicas=4), router="round-robin"), requests)
    px = run_cluster(config(Layout(REPLICAS, replicas=4), router="prefix"), requests)
    assert px.prefix_hit_rate() > rr.prefix_hit_rate()


def test_layout_for_checks_the_gpu_count():
    assert layout_for("replicas", 8, tp=2) == Layout(REPLICAS, tp=2, replicas=4)
    assert layout_for("tp", 4) == Layout(TP, tp=4)
    assert layout_for("pd", 8, tp=2) == Layout(PD, tp=2, prefill=2, decode=2)
    assert layout_for("pd", 6, prefill=1, decode=5).n_gpus == 6
    for bad in (dict(kind="replicas", gpus=6, tp=4), dict(kind="pd", gpus=1),
                dict(kind="pd", gpus=8, prefill=1, decode=1), dict(kind="tp", gpus=4, tp=2)):
        with pytest.raises(ValueError):
            layout_for(**bad)


def test_instance_pool_at_t_one_is_the_one_gpu_pool_and_grows_with_t():
    assert instance_pool_blocks(CFG, H100) == simulated_pool_blocks(CFG, H100)
    # the weights split t ways leave more of each GPU for KV
    assert instance_pool_blocks(CFG, H100, tp=2) > 2 * instance_pool_blocks(CFG, H100)


def test_records_round_trip_and_refuse_bad_fields():
    from inferlab.engines.cluster.records import ClusterRequest, KVTransfer

    result = run_cluster(config(Layout(PD, prefill=1, decode=1)), workload(n=8))
    for r in result.requests:
        assert ClusterRequest.from_dict(r.to_dict()) == r
    for s in result.transfers:
        assert KVTransfer.from_dict(s.to_dict()) == s
    bad = dataclasses.replace(result.transfers[0]).to_dict() | {"end_s": -1}
    with pytest.raises(ValueError, match="end_s"):
        KVTransfer.from_dict(bad)
    times = result.requests[0].to_dict()["token_times_s"]
    for value in (10**400, math.nan, True):  # a huge integer once raised OverflowError
        bad = result.requests[0].to_dict() | {"token_times_s": times[:1] + [value]}
        with pytest.raises(ValueError, match=r"^request: token_times_s\[1\]: expected a finite"):
            ClusterRequest.from_dict(bad)
