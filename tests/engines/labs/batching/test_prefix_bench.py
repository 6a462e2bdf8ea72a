"""`bench prefix`'s parts at small sizes: the rows compare the same requests, the ratios are
the rows' quotients, and the exact hit counts equal the workload's own reference."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.batching import prefix_bench as pb
from inferlab.engines.serve.prefix_workloads import expected_cached_tokens, make_scenario


def test_hit_tokens_by_hash_and_radix_equal_the_definition():
    """Multi-turn conversations whose turns never overlap, pool never short: each request's
    cached tokens are the issue's min(L, len - 1), floored to blocks for hash."""
    items = make_scenario("multi-turn", 0, n=2, scale=0.25, vocab_size=128256)
    prompts = [w.prompt_token_ids for w in items]
    for cache, block in (("radix", 1), ("hash", pb.BLOCK_SIZE)):
        got = pb._simulated(items, cache)
        assert got["cached_tokens"] == sum(expected_cached_tokens(prompts, block)), cache
    hits = pb.hit_tokens(scale=0.25)
    for name in ("multi-turn", "doc-qa"):
        h = hits[name]
        assert h["radix"]["cached_tokens"] >= h["hash"]["cached_tokens"] > 0
        assert h["radix_vs_hash_hit_tokens"] == pytest.approx(
            h["radix"]["cached_tokens"] / h["hash"]["cached_tokens"])


def test_few_shot_pressure_compares_schedules_on_one_pool():
    out = pb.few_shot_pressure(n=32, n_prefixes=4)
    assert out["pool_blocks"] < out["working_set_blocks"]  # under pressure
    rows = out["rows"]
    assert out["lpm_vs_fcfs_throughput"] == pytest.approx(
        rows["radix_lpm"]["output_tokens_per_s"] / rows["radix_fcfs"]["output_tokens_per_s"])
    # grouping the requests by their examples finds at least as many hits
    assert rows["radix_lpm"]["prefix_hit_rate"] >= rows["radix_fcfs"]["prefix_hit_rate"]


def test_step_overhead_times_the_tree_while_it_runs_full():
    out = pb.step_overhead(n=300)
    assert out["running_max"] == pb.OVERHEAD_RUNNING
    assert 0 < out["radix_tree_ops_frac"] <= out["radix_step_overhead_frac"]
    assert out["radix_ms_per_iteration"] > 0 and out["simulated_iteration_ms"] > 0


@pytest.mark.slow
def test_wall_multi_turn_on_the_tiny_model_keeps_outputs_equal():
    out = pb.wall_multi_turn(model="tiny", conversations=2)
    assert out["outputs_equal"] is True
    rows = out["rows"]
    assert rows["none"]["prefix_hit_rate"] == 0
    assert rows["radix"]["prefix_hit_rate"] >= rows["hash"]["prefix_hit_rate"] > 0
    assert out["ttft_p50_radix_vs_none"] == pytest.approx(
        rows["radix"]["ttft_p50_s"] / rows["none"]["ttft_p50_s"])
