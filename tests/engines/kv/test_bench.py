"""`run_kv_bench` runs end to end and its figures have the right shape (values are not asserted
against goals: timings depend on the machine)."""

from __future__ import annotations

from inferlab.engines.kv.bench import ragged_requests, run_kv_bench, simulate_waste


def test_run_kv_bench_quick_has_every_figure():
    out = run_kv_bench(quick=True)
    for key in (
        "paged_waste_frac",
        "contiguous_waste_frac",
        "paged_attention_time_ratio",
        "allocator_ops_per_s",
        "prefix_hit_rate",
    ):
        assert isinstance(out[key], float), key
    assert 0.0 <= out["paged_waste_frac"] < out["contiguous_waste_frac"] < 1.0
    assert out["paged_attention_max_abs_err"] < 1e-5
    assert 0.5 < out["prefix_hit_rate"] < 1.0


def test_paged_pool_admits_more_of_the_same_stream():
    reqs = ragged_requests(30, 16, 256, seed=1)
    assert all(p >= 1 and p + o >= 16 for p, o in reqs)
    sim = simulate_waste(reqs, n_slots=8 * 512, max_seq_len=512)
    assert sim["paged"]["max_concurrent_seqs"] > sim["contiguous"]["max_concurrent_seqs"] == 8
    assert sim["paged"]["steps"] < sim["contiguous"]["steps"]
