"""Expert parallelism: the all-to-all closed form (hand-worked, and against DeepEP's measured
table), expert loads and EPLB (hand-worked, hypothesis properties), the expert-parallel
executor (EP = 1 is the replica run record for record, dispatch/combine bytes are the closed
form, dual-batch overlap is max(compute, comm)), its pool, the layout and the ep search."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.cluster.all_to_all import (
    all_to_all_bytes,
    all_to_all_s,
    combine_bytes,
    dispatch_bytes,
    micro_batches_s,
    wire_bytes_per_value,
)
from inferlab.engines.cluster.cluster import ClusterConfig, run_cluster
from inferlab.engines.cluster.deepep import (
    deepep_low_latency_comparison,
    deepep_low_latency_table,
    deepep_part,
)
from inferlab.engines.cluster.ep_executor import (
    ExpertParallelExecutor,
    dense_weight_params,
    ep_pool_blocks,
    ep_weight_bytes_per_gpu,
)
from inferlab.engines.cluster.eplb import eplb_placement, pack, replicate
from inferlab.engines.cluster.expert_load import (
    ExpertLoad,
    contiguous_placement,
    expert_shares,
    gpu_loads,
    imbalance,
)
from inferlab.engines.cluster.layout import EP, PD, REPLICAS, Layout, layout_for
from inferlab.engines.cluster.links import load_link_preset
from inferlab.engines.cluster.search import search_grid
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import requests_from_workload
from inferlab.engines.serve.executors import mixed_step_cost, simulated_pool_blocks
from inferlab.engines.serve.scheduler import PrefillChunk, SchedulerOutput
from inferlab.engines.serve.workload import LengthDist, Workload, generate

QWEN = load_model_preset("qwen3-30b-a3b")  # 48 MoE layers of 128 experts, top-8
DEEPSEEK = load_model_preset("deepseek-v3")
H100 = load_hardware_preset("h100-sxm")
H200 = load_hardware_preset("h200")
NVLINK = load_link_preset("nvlink4")
IB = load_link_preset("infiniband-400g")


def workload(n=40, rate=30.0, seed=0):
    items = generate(Workload(n_requests=n, rate_per_s=rate, seed=seed,
                              prompt_len=LengthDist.lognormal(5.5, 0.5),
                              output_len=LengthDist.lognormal(3.5, 0.5)))
    return requests_from_workload(items, QWEN.vocab_size)


def prefill_out(n_tokens):
    return SchedulerOutput("continuous", 0.0, (PrefillChunk("a", 0, n_tokens),), (), (),
                           ("a",), n_tokens)


# ---- the all-to-all closed form ------------------------------------------------------------

def test_all_to_all_bytes_hand_worked():
    # DeepSeek-V3's decode batch of 128 tokens per GPU, EP 8: 7/8 of the 8 copies leave the GPU
    fp8 = 128 * 8 * 7168 * 7 / 8 * (1 + 4 / 128)  # a byte per value + a fp32 scale per 128
    assert wire_bytes_per_value("fp8") == 1.03125
    assert dispatch_bytes(128, 8, 7168, 8) == pytest.approx(fp8, rel=1e-15)
    assert dispatch_bytes(128, 8, 7168, 8) == pytest.approx(6_623_232.0, rel=1e-15)
    assert combine_bytes(128, 8, 7168, 8) == pytest.approx(128 * 8 * 7168 * 7 / 8 * 2)
    assert all_to_all_s(1e9, 50e9, 2e-6) == pytest.approx(0.02 + 2e-6)
    # two micro-batches: the same bytes, twice the latency
    assert micro_batches_s(1e9, 2, 50e9, 2e-6) == pytest.approx(0.02 + 4e-6)


def test_ep_one_sends_nothing():
    assert all_to_all_bytes(4096, 8, 7168, 1, 2.0) == 0.0
    assert all_to_all_s(dispatch_bytes(4096, 8, 7168, 1), 50e9, 2e-6) == 0.0
    with pytest.raises(ValueError, match="ep"):
        all_to_all_bytes(1, 8, 7168, 0, 1.0)


def test_deepep_table_is_pinned_and_every_row_within_fifteen_percent():
    table = deepep_low_latency_table()
    assert table["commit"] in table["source"]
    assert [r[0] for r in table["rows"]] == [8, 16, 32, 64, 128, 256]
    rows = deepep_low_latency_comparison()
    assert len(rows) == 6
    for r in rows:
        # our bytes: 128 tokens × 8 × 7168 × (1 − 1/EP) at 1.03125 B (fp8) and 2 B (bf16)
        assert r.dispatch_bytes == pytest.approx(128 * 8 * 7168 * (1 - 1 / r.ep) * 1.03125)
        assert r.combine_bytes == pytest.approx(128 * 8 * 7168 * (1 - 1 / r.ep) * 2)
        assert abs(r.dispatch_ratio - 1) <= 0.15, r
        assert abs(r.combine_ratio - 1) <= 0.15, r
    # EP 8 lands lowest: DeepEP's bandwidth counts the 1/8 of the copies that stay home
    assert rows[0].dispatch_ratio < rows[-1].dispatch_ratio
    # the bench's headline is the row ratio farthest from 1: EP 8's dispatch (0.904)
    assert deepep_part()["ep_all_to_all_vs_deepep_low_latency"] == rows[0].dispatch_ratio


# ---- expert loads and EPLB ----------------------------------------------------------------

def test_shares_uniform_zipf_and_counts():
    uniform = expert_shares(ExpertLoad(), 3, 16, 4)
    assert np.all(uniform == 0.25)
    zipf = expert_shares(ExpertLoad("zipf", 1.2, seed=7), 3, 16, 4)
    assert zipf.sum(axis=1) == pytest.approx([4, 4, 4])
    assert zipf.max() <= 1.0
    assert np.array_equal(zipf, expert_shares(ExpertLoad("zipf", 1.2, seed=7), 3, 16, 4))
    assert not np.array_equal(zipf, expert_shares(ExpertLoad("zipf", 1.2, seed=8), 3, 16, 4))
    assert not np.array_equal(zipf[0], zipf[1])  # the hot experts differ by layer
    # s = 0 is uniform
    assert expert_shares(ExpertLoad("zipf", 0.0), 1, 16, 4) == pytest.approx(uniform[:1])
    # counts: 2 tokens top-2 over 4 experts, one expert chosen by both
    counts = expert_shares(ExpertLoad("counts", counts=((2, 1, 1, 0),)), 2, 4, 2)
    assert counts.tolist() == [[1.0, 0.5, 0.5, 0.0]] * 2
    # fewer measured layers than the model's: the rows repeat in order
    two = expert_shares(ExpertLoad("counts", counts=((3, 1), (1, 1))), 3, 2, 1)
    assert two.tolist() == [[0.75, 0.25], [0.5, 0.5], [0.75, 0.25]]
    with pytest.raises(ValueError, match="2 experts"):
        expert_shares(ExpertLoad("counts", counts=((1, 1, 1),)), 2, 2, 1)


def test_zipf_share_past_one_is_capped_and_spread():
    # top-2 of 4 at skew 3: raw shares 2 × (1, 1/8, 1/27, 1/64) / 1.18 ≈ 1.69 for the first
    q = expert_shares(ExpertLoad("zipf", 3.0), 1, 4, 2)[0]
    assert q.max() == 1.0 and q.sum() == pytest.approx(2.0)
    rest = np.sort(q)[:3]
    assert rest / rest.sum() == pytest.approx(np.array([1 / 64, 1 / 27, 1 / 8])
                                              / (1 / 64 + 1 / 27 + 1 / 8))


def test_contiguous_loads_and_imbalance_hand_worked():
    shares = np.array([0.8, 0.4, 0.2, 0.2, 0.1, 0.1, 0.1, 0.1])  # top-2 of 8
    placement = contiguous_placement(8, 4)
    assert placement.tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    loads = gpu_loads(shares, placement)
    assert loads == pytest.approx([1.2, 0.4, 0.2, 0.2])
    assert imbalance(loads) == pytest.approx(1.2 / 0.5)


def test_eplb_hand_worked():
    shares = np.array([0.8, 0.4, 0.2, 0.2, 0.1, 0.1, 0.1, 0.1])
    # 4 extra copies, each to the largest share per copy (ties: the lowest id): expert 0
    # (0.8 → 0.4 each), expert 0 again (0.4 = expert 1's, lower id), expert 1 (0.4),
    # expert 0 (0.8/3 ≈ 0.27): expert 0 in 4 copies of 0.2, expert 1 in 2 of 0.2
    counts = replicate(shares, 12)
    assert counts.tolist() == [4, 2, 1, 1, 1, 1, 1, 1]
    # 12 copies, 3 a GPU: eight of 0.2 two to a GPU, then the four 0.1s one each: 0.5 each
    placement = eplb_placement(shares, 4, 1)
    assert placement.shape == (4, 3)
    loads = gpu_loads(shares, placement)
    assert loads == pytest.approx([0.5] * 4)  # from 1.2 contiguous: imbalance 2.4 → 1
    assert pack(np.array([5.0, 1.0, 4.0, 2.0]), 2, 2).tolist() == [[0, 1], [2, 3]]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), ep_log=st.integers(0, 3), per_gpu=st.integers(1, 4),
       redundant=st.integers(0, 3), top_k=st.integers(1, 4))
def test_eplb_never_raises_the_hottest_gpu_and_keeps_every_token(data, ep_log, per_gpu,
                                                                  redundant, top_k):
    ep = 2 ** ep_log
    n = ep * per_gpu
    top_k = min(top_k, n)
    counts = data.draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n)
                       .filter(lambda c: sum(1 for x in c if x) >= top_k))
    shares = expert_shares(ExpertLoad("counts", counts=(tuple(counts),)), 1, n, top_k)[0]
    before = gpu_loads(shares, contiguous_placement(n, ep))
    placement = eplb_placement(shares, ep, redundant)
    assert placement.shape == (ep, per_gpu + redundant)
    assert set(placement.ravel().tolist()) == set(range(n))  # every expert held
    # independent count: each copy carries its expert's share over its copies
    copies = np.bincount(placement.ravel(), minlength=n)
    after = np.array([sum(shares[i] / copies[i] for i in row) for row in placement])
    assert after.sum() == pytest.approx(top_k)
    assert after.max() <= before.max() + 1e-12


# ---- the executor --------------------------------------------------------------------------

def config(layout, **kw):
    return ClusterConfig(QWEN, H100, NVLINK, layout, **kw)


def test_ep_one_is_the_replica_run_record_for_record():
    requests = workload()
    rep = run_cluster(config(Layout(REPLICAS, replicas=2)), requests)
    ep1 = run_cluster(config(Layout(EP, ep=1, replicas=2)), requests)
    assert [i.kv_total_blocks for i in ep1.instances] == [i.kv_total_blocks
                                                          for i in rep.instances]
    assert all(i.comm_s == 0.0 for i in ep1.instances)
    assert all(m.dispatch_bytes == 0 == m.combine_s for m in ep1.moe_layers)
    for a, b in zip(rep.instances, ep1.instances, strict=True):
        assert len(a.iterations) == len(b.iterations)
        for x, y in zip(a.iterations, b.iterations, strict=True):
            dx, dy = x.to_dict(), y.to_dict()
            for key in ("start_s", "end_s", "forward_s"):
                assert dy.pop(key) == pytest.approx(dx.pop(key), rel=1e-12, abs=1e-15)
            assert dx == dy
    for a, b in zip(rep.requests, ep1.requests, strict=True):
        assert a.instance == b.instance
        assert b.token_times_s == pytest.approx(a.token_times_s, rel=1e-12)


def test_gpu_cost_at_ep_one_is_the_one_gpu_step():
    ex = ExpertParallelExecutor(QWEN, H100)
    for prefills, contexts in (([(0, 512)], []), ([(128, 64)], [428] * 7), ([], [10])):
        got = ex.gpu_cost(prefills, len(contexts), sum(contexts))
        want = mixed_step_cost(QWEN, prefills, contexts)
        assert got.flops == pytest.approx(want.flops, rel=1e-12)
        assert got.bytes_moved == pytest.approx(want.bytes_moved, rel=1e-12)


def test_the_dense_part_does_not_depend_on_top_k():
    """What the executor removes as the routed experts is exactly what top-k adds to the
    one-GPU step cost: its 'dense part' is the same at k and k + 2."""
    wider = dataclasses.replace(QWEN, n_experts_active=QWEN.n_experts_active + 2)
    dense = []
    for cfg in (QWEN, wider):
        ex = ExpertParallelExecutor(cfg, H100)
        whole = mixed_step_cost(cfg, [(0, 300)], [])
        routed = ex.uniform_experts_cost(300)
        dense.append((whole.flops - routed.flops, whole.bytes_moved - routed.bytes_moved))
    assert dense[1][0] == pytest.approx(dense[0][0], rel=1e-12)
    assert dense[1][1] == pytest.approx(dense[0][1], rel=1e-12)
    assert dense[0][1] > dense_weight_params(QWEN) * 2  # weights + activations and KV


def test_dispatch_and_combine_bytes_per_step_are_the_closed_form():
    ex = ExpertParallelExecutor(QWEN, H100, tp=1, ep=4, link=NVLINK)
    ex.iteration_time_s(prefill_out(512), {})
    k, h = QWEN.n_experts_active, QWEN.d_model
    per_gpu = 512 / 4  # tokens one GPU holds
    want_d = per_gpu * k * h * (3 / 4) * 1.03125
    want_c = per_gpu * k * h * (3 / 4) * 2
    assert len(ex.dispatch_bytes) == QWEN.n_moe_layers == 48
    assert ex.dispatch_bytes == pytest.approx(np.full(48, want_d), rel=1e-12)
    assert ex.combine_bytes == pytest.approx(np.full(48, want_c), rel=1e-12)
    w, alpha = NVLINK.bandwidth_bytes_per_s, NVLINK.latency_s
    assert ex.comm_s == pytest.approx(48 * (want_d / w + alpha + want_c / w + alpha))


def test_skewed_load_sends_more_from_the_hottest_gpu_and_eplb_brings_it_back():
    zipf = ExpertLoad("zipf", 1.0, seed=3)
    skewed = ExpertParallelExecutor(QWEN, H100, ep=8, link=NVLINK, load=zipf)
    balanced = ExpertParallelExecutor(QWEN, H100, ep=8, link=NVLINK, load=zipf, eplb_slots=2)
    for ex in (skewed, balanced):
        ex.iteration_time_s(prefill_out(1024), {})
    layers = skewed.moe_layers()
    closed = dispatch_bytes(1024 / 8, 8, QWEN.d_model, 8)
    for m in layers:
        assert m.imbalance > 1
        assert m.dispatch_bytes == pytest.approx(closed * m.imbalance, rel=1e-12)
    for m in balanced.moe_layers():
        assert m.imbalance_eplb <= m.imbalance
    assert balanced.comm_s < skewed.comm_s
    # once the experts' FLOPs dominate, the balanced hottest GPU finishes sooner (at a small
    # batch the copies' extra weight reads can cost more than the balance saves)
    assert (balanced.batch_time_s([(0, 8192)], 0, 0)
            < 0.8 * skewed.batch_time_s([(0, 8192)], 0, 0))


def test_dual_batch_overlap_is_max_of_compute_and_two_micro_batches():
    plain = ExpertParallelExecutor(QWEN, H100, ep=8, link=IB)
    dbo = ExpertParallelExecutor(QWEN, H100, ep=8, link=IB, dual_batch_overlap=True)
    out = prefill_out(2048)
    t_plain = plain.iteration_time_s(out, {})
    t_dbo = dbo.iteration_time_s(out, {})
    compute = plain.batch_time_s([(0, 2048)], 0, 0)
    assert t_plain == pytest.approx(compute + plain.comm_s, rel=1e-12)
    assert dbo.comm_s == pytest.approx(plain.comm_s + 2 * 48 * IB.latency_s, rel=1e-12)
    assert t_dbo == pytest.approx(max(compute, dbo.comm_s), rel=1e-12)
    assert t_dbo < t_plain


def test_pool_at_one_gpu_and_weights_per_gpu():
    assert ep_pool_blocks(QWEN, H100) == simulated_pool_blocks(QWEN, H100)
    # DeepSeek-V3 in fp8 on EP 16, t = 2: dense/2 + 58 × (16 + 1) experts
    dense = dense_weight_params(DEEPSEEK)
    want = math.ceil(dense / 2 + 58 * 17 * DEEPSEEK.expert_params)
    assert ep_weight_bytes_per_gpu(DEEPSEEK, 2, 16, 1, "fp8") == want
    # a GPU holds ~1/e of the routed experts: more GPUs per group, more KV per GPU
    assert ep_pool_blocks(QWEN, H100, 1, 8) > 8 * ep_pool_blocks(QWEN, H100)
    with pytest.raises(ValueError, match="divide"):
        ep_pool_blocks(QWEN, H100, 1, 3)


def test_pd_with_ep_on_each_side_runs_every_request():
    requests = workload(n=20)
    result = run_cluster(config(Layout(PD, tp=1, ep=4, prefill=1, decode=1)), requests)
    assert result.config.layout.n_gpus == 8
    assert all(len(r.token_times_s) == r.max_new_tokens for r in result.requests)
    assert all(i.comm_s > 0 for i in result.instances)
    assert len(result.moe_layers) == 48


# ---- the layout and the search -------------------------------------------------------------

def test_ep_layout_arithmetic():
    lay = layout_for("ep", 64, tp=2, ep=16)
    assert lay == Layout(EP, tp=2, ep=16, replicas=4)
    assert lay.n_gpus == 64 and lay.n_instances == 4 and lay.label == "4 × EP16 t2"
    assert layout_for("pd", 32, ep=8).n_gpus == 32
    assert Layout(REPLICAS, replicas=2).to_dict() == {"kind": "replicas", "tp": 1,
                                                      "replicas": 2, "prefill": 0,
                                                      "decode": 0}
    for bad in (dict(kind="ep", gpus=64, tp=3, ep=16), dict(kind="ep", gpus=60, ep=16),
                dict(kind="replicas", gpus=8, ep=2)):
        with pytest.raises(ValueError):
            layout_for(**bad)
    with pytest.raises(ValueError, match="expert parallelism"):
        Layout(REPLICAS, eplb_slots=1)


def test_ep_search_of_deepseek_on_64_h200s_holds_at_least_200_layouts():
    for dtype, want in (("fp16", 204), ("fp8", 300)):
        tps, columns, grid = search_grid("ep", DEEPSEEK, 64, H200, dtype)
        cells = [c for row in grid for c in row if c is not None]
        assert len(cells) == want
        assert all(c.n_gpus <= 64 and c.ep % c.tp == 0 for c in cells)
        assert len(set(cells)) == len(cells)
        for row, t in zip(grid, tps, strict=True):
            assert {c.tp for c in row if c} == {t}
            assert len(row) == len(columns)
        assert all(any(row[j] for row in grid) for j in range(len(columns)))  # none empty
    # without the hardware nothing is judged too big: e = 2 and 4 rows appear
    tps, _, grid = search_grid("ep", DEEPSEEK, 64)
    assert min(c.ep for row in grid for c in row if c) == 2
