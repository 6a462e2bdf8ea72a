"""Block ids become content: shared ids ⇔ shared token blocks; the ids' unbounded-cache hit
rate by hand and as the real scheduler and block manager achieve it."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.labs.batching.session import prefix_hit_rate
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import ServingEngine, requests_from_workload
from inferlab.engines.serve.executors import SimulatedExecutor
from inferlab.engines.serve.scheduler import Scheduler
from inferlab.engines.serve.traces.content import (
    block_tokens,
    clear_block_cache,
    prompt_token_ids,
    unbounded_hit_rate,
    workload_requests,
)
from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.workload import WorkloadError

VOCAB = 128_256


def test_a_block_is_fixed_by_its_id():
    a = block_tokens(7, 16, VOCAB)
    assert len(a) == 16 and all(0 <= t < VOCAB for t in a)
    clear_block_cache()
    assert block_tokens(7, 16, VOCAB) == a  # not the cache: the seed
    assert block_tokens(7, 16, 50)[0] < 50


def _splitmix(z: int) -> int:
    m = 2**64 - 1
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=5, unique=True),
       st.integers(1, 40), st.sampled_from([50, 1000, VOCAB]))
def test_blocks_are_the_splitmix_stream_in_shared_ints(block_ids, size, vocab):
    """The module doc's formula in plain ints (the reference for the numpy draw); equal
    ids are one int object, the draw's shared table's (no int made per id)."""
    clear_block_cache()
    got = [block_tokens(b, size, vocab) for b in block_ids]
    for block_id, ids in zip(block_ids, got, strict=True):
        seed = _splitmix(block_id)
        want = tuple(_splitmix((seed + (j + 1) * 0x9E3779B97F4A7C15) % 2**64) % vocab
                     for j in range(size))
        assert ids == want and ids.max_id == max(want)
    first: dict[int, object] = {}
    for ids in got:
        for t in ids:
            assert first.setdefault(t, t) is t


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=6), min_size=2,
                max_size=6))
def test_shared_ids_iff_shared_token_blocks(chains):
    bs = 8
    records = [TraceRequest(0.0, len(c) * bs, 1, tuple(c), bs) for c in chains]
    prompts = [prompt_token_ids(r, VOCAB, i) for i, r in enumerate(records)]
    blocks = {}
    for r, p in zip(records, prompts, strict=True):
        for k, block_id in enumerate(r.block_hashes):
            blocks.setdefault(block_id, set()).add(p[k * bs:(k + 1) * bs])
    assert all(len(v) == 1 for v in blocks.values())  # one id: one content, everywhere
    contents = [next(iter(v)) for v in blocks.values()]
    assert len(set(contents)) == len(contents)  # different ids: different content


def test_a_prompt_is_its_blocks_cut_at_its_length_then_its_own_tail():
    r = TraceRequest(0.0, 20, 1, (3, 4), 8)
    ids = prompt_token_ids(r, VOCAB, 0)
    assert ids[:8] == block_tokens(3, 8, VOCAB) and ids[8:16] == block_tokens(4, 8, VOCAB)
    assert len(ids) == 20
    assert prompt_token_ids(r, VOCAB, 1)[16:] != ids[16:]  # the tail is the request's own
    assert prompt_token_ids(TraceRequest(0.0, 5, 1, (3, 4), 8), VOCAB, 0) == ids[:5]


def test_hit_rate_by_hand():
    bs = 4
    records = [TraceRequest(0, 10, 1, (1, 2, 3), bs),   # nothing seen: 0
               TraceRequest(1, 12, 1, (1, 2, 9), bs),   # run 2: 8
               TraceRequest(2, 6, 1, (1, 2, 3), bs),    # run 3: 12, capped at 6
               TraceRequest(3, 8, 1, (2, 3), bs),       # 2 never led a chain: 0
               TraceRequest(4, 5, 1, (), 0)]            # no ids: 0
    assert unbounded_hit_rate(records) == pytest.approx((0 + 8 + 6 + 0 + 0) / 41)
    assert unbounded_hit_rate([]) == 0.0


def test_empty_requests_cannot_become_engine_requests():
    with pytest.raises(WorkloadError, match="request 0: 3 input and 0 output tokens"):
        workload_requests([TraceRequest(0, 3, 0)], VOCAB)


def _random_trace(rng: random.Random, n: int, bs: int) -> list[TraceRequest]:
    """Chains grown as a tree (each id names its prefix), each ending in a fresh, full block:
    no request's cached run reaches its last token, so a real cache can hit all of it."""
    chains: list[tuple[int, ...]] = []
    next_id = 0
    records = []
    for i in range(n):
        base = rng.choice(chains)[:rng.randint(0, 4)] if chains and rng.random() < 0.8 else ()
        chain = base
        for _ in range(rng.randint(1, 3)):
            chain += (next_id,)
            next_id += 1
        chains.append(chain)
        records.append(TraceRequest(1000.0 * i, len(chain) * bs, 2, chain, bs))
    return records


@pytest.mark.parametrize("prefix_cache", ["hash", "radix"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_unbounded_pool_achieves_the_ids_closed_form(prefix_cache, seed):
    bs = 4
    records = _random_trace(random.Random(seed), 40, bs)
    expected = unbounded_hit_rate(records)
    assert expected > 0.2
    cfg, preset = load_model_preset("llama-3-8b"), load_hardware_preset("h100-sxm")
    requests = requests_from_workload(workload_requests(records, cfg.vocab_size),
                                      cfg.vocab_size)
    blocks = BlockManager(10_000, bs, prefix_cache=prefix_cache)
    engine = ServingEngine(Scheduler("continuous", blocks, max_num_batched_tokens=4096,
                                     max_num_seqs=8),
                           SimulatedExecutor(cfg, preset), requests)
    engine.run()
    assert blocks.n_evicted_blocks == 0
    assert prefix_hit_rate(engine.scheduler.seqs.values()) == pytest.approx(expected)
