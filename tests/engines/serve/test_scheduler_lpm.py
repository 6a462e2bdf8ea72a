"""Longest-prefix-match admission by hand: the cached prompt goes first (by hash or radix),
and a queue longer than LPM_MAX_QUEUE falls back to FCFS."""

from __future__ import annotations

import pytest

from inferlab.engines.kv import BlockManager
from inferlab.engines.serve.policies import LPM_MAX_QUEUE
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scheduler import Scheduler

SHARED = list(range(100, 132))  # 2 blocks of 16


def _cache_shared(sched: Scheduler) -> None:
    """Run one request with the shared prefix to its end, so the prefix is cached."""
    sched.add(Request("warm", SHARED + [1], 1))
    out = sched.schedule(0.0)
    sched.update(out, {"warm": 7}, 0.1)
    assert not sched.has_unfinished


@pytest.mark.parametrize("cache", ["radix", "hash"])
@pytest.mark.parametrize("order, first", [("fcfs", "cold"), ("lpm", "hot")])
def test_the_cached_prompt_is_admitted_first_under_lpm(cache, order, first):
    # a budget of 40 tokens admits one of the two 40-token prompts per iteration
    sched = Scheduler("continuous", BlockManager(64, 16, prefix_cache=cache),
                      max_num_batched_tokens=40, schedule=order)
    _cache_shared(sched)
    sched.add(Request("cold", list(range(500, 540)), 4))
    sched.add(Request("hot", SHARED + list(range(600, 608)), 4))
    assert sched.blocks.cached_prefix_len(SHARED + list(range(600, 608))) == 32
    out = sched.schedule(1.0)
    assert out.prefills[0].seq_id == first
    if first == "hot":
        assert out.prefills[0].start == 32 and out.cached_tokens == {"hot": 32}


def test_a_long_queue_is_served_fcfs():
    sched = Scheduler("continuous", BlockManager(4096, 16, prefix_cache="radix"),
                      max_num_batched_tokens=40, schedule="lpm")
    _cache_shared(sched)
    for i in range(LPM_MAX_QUEUE):
        sched.add(Request(f"cold{i}", [900 + i] * 40, 4))
    sched.add(Request("hot", SHARED + [1] * 8, 4))  # the 129th waiting: no reordering
    out = sched.schedule(1.0)
    assert out.prefills[0].seq_id == "cold0"
