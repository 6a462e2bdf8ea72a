"""`append_each` (a decode step's reservations in one call) against `append_token` one sequence
at a time, and `mark_all_computed` against `mark_computed` one at a time: two managers driven
alike end in the same tables, free queue, cache and copies, for every prefix-cache strategy."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from inferlab.engines.kv import BlockManager, KVOutOfMemoryError
from inferlab.engines.kv.block_manager import PREFIX_CACHES


def state(mgr: BlockManager):
    return ({s: (mgr.block_table(s), mgr.token_ids(s)) for s in mgr.seq_ids},
            mgr.free_block_ids(), mgr.cached_block_ids(), mgr.n_evicted_blocks,
            [mgr.ref_count(i) for i in range(mgr.n_blocks)])


def one_by_one(mgr: BlockManager, ids, tokens):
    """What `append_each` promises, spelled with `append_token`."""
    cows = []
    for i, (sid, token) in enumerate(zip(ids, tokens, strict=True)):
        try:
            cow = mgr.append_token(sid, token)
        except KVOutOfMemoryError:
            return i, cows
        if cow is not None:
            cows.append((sid, *cow))
    return len(ids), cows


@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from(PREFIX_CACHES), block_size=st.sampled_from([1, 2, 3]),
       prompts=st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=5), min_size=1,
                        max_size=5),
       forks=st.lists(st.integers(0, 10), max_size=3),
       frees=st.lists(st.integers(0, 10), max_size=2),
       steps=st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=8), max_size=6))
def test_append_each_is_append_token_in_order(kind, block_size, prompts, forks, frees, steps):
    """Shared last blocks (forks) are copied, new blocks taken in order (runs of sequences
    that each start one, cached-free blocks evicted), and a step stops at the first sequence
    that finds no block, exactly as one append_token call after another."""
    a, b = (BlockManager(10, block_size=block_size, prefix_cache=kind) for _ in range(2))
    for mgr in (a, b):
        for i, p in enumerate(prompts):
            try:
                mgr.allocate(i, p)
                mgr.mark_computed(i, len(p))
            except KVOutOfMemoryError:
                pass
        for k, f in enumerate(forks):
            live = mgr.seq_ids
            if live:
                mgr.fork(live[f % len(live)], f"f{k}")
        for f in frees:  # their computed blocks stay cached (hash), free to be taken
            live = mgr.seq_ids
            if len(live) > 1:
                mgr.free(live[f % len(live)])
    assert state(a) == state(b)
    for tokens in steps:
        ids = (a.seq_ids * 3)[: len(tokens)]  # a sequence may come back in one step
        tokens = tokens[: len(ids)]
        if any(a.num_tokens(s) + ids.count(s) > a.n_blocks * block_size for s in set(ids)):
            continue  # can never fit: KVCapacityError either way
        assert a.append_each(ids, tokens) == one_by_one(b, ids, tokens)
        assert state(a) == state(b)
        a.mark_all_computed(a.seq_ids)
        for sid in b.seq_ids:
            b.mark_computed(sid, b.num_tokens(sid))
        assert state(a) == state(b)


def test_append_each_names_the_copies():
    mgr = BlockManager(8, block_size=4, enable_prefix_caching=False)
    mgr.allocate("p", [1, 2, 3, 4, 5, 6])  # [0, 1], block 1 half full
    mgr.fork("p", "c")
    mgr.allocate("q", [7, 8, 9, 10])  # [2], full
    # p copies its shared block 1 into 3, c then holds 1 alone (in place); q takes block 4
    assert mgr.append_each(["p", "c", "q"], [9, 9, 9]) == (3, [("p", 1, 3)])
    assert [mgr.block_table(s) for s in ("p", "c", "q")] == [[0, 3], [0, 1], [2, 4]]


def test_append_each_stops_before_the_first_sequence_without_a_block():
    mgr = BlockManager(3, block_size=2, enable_prefix_caching=False)
    mgr.allocate("a", [1])  # [0]
    mgr.allocate("b", [1, 2])  # [1]
    mgr.allocate("c", [1, 2])  # [2]
    assert mgr.append_each(["a", "b", "c"], [5, 5, 5]) == (1, [])
    assert mgr.num_tokens("b") == 2 and mgr.num_tokens("a") == 2
    with pytest.raises(KVOutOfMemoryError):
        mgr.append_each(["b"], [5], partial=False)
    with pytest.raises(KeyError, match="unknown sequence 'x'"):
        mgr.append_each(["x"], [5])


def test_append_each_uses_tables_only_while_they_are_valid():
    """`tables(ids)` stands for looking the ids up until a sequence is allocated, forked or
    freed; an unknown id is refused before anything changes."""
    mgr = BlockManager(16, block_size=4, enable_prefix_caching=False)
    for sid in "abc":
        mgr.allocate(sid, [1, 2, 3])
    tables = mgr.tables(["a", "b"])
    assert mgr.append_each(["a", "b"], [5, 5], tables=tables) == (2, [])
    mgr.free("a")
    mgr.allocate("a", [7])  # a new record under the same id: the tables are stale
    assert mgr.append_each(["a", "b"], [6, 6], tables=tables) == (2, [])
    assert mgr.token_ids("a") == [7, 6] and mgr.token_ids("b") == [1, 2, 3, 5, 6]
    tables = mgr.tables(["a", "b"])
    mgr.fork("b", "b2")  # b's last block 4 is shared now: b copies it into 5
    assert mgr.append_each(["a", "b"], [8, 8], tables=tables) == (2, [("b", 4, 5)])
    with pytest.raises(KeyError, match="unknown sequence 'x'"):
        mgr.append_each(["c", "x"], [1, 1])
    assert mgr.token_ids("c") == [1, 2, 3]


@pytest.mark.parametrize("kind", PREFIX_CACHES)
def test_mark_computed_each_is_mark_computed_in_order(kind):
    """Chunks of several prompts marked at once register (hash) or insert (radix) exactly
    what marking them one by one does; a count past the reserved tokens is refused there."""
    a, b = (BlockManager(12, block_size=2, prefix_cache=kind) for _ in range(2))
    prompts = {"p": [1, 2, 3, 4, 5], "q": [1, 2, 3, 4, 9, 9], "r": [7, 7, 7]}
    for mgr in (a, b):
        for sid, prompt in prompts.items():
            mgr.allocate(sid, prompt)
    a.mark_computed_each(["p", "q", "r"], [4, 6, 2])
    for sid, n in (("p", 4), ("q", 6), ("r", 2)):
        b.mark_computed(sid, n)
    assert state(a) == state(b)
    assert a.cached_prefix_len([1, 2, 3, 4, 9, 9, 1]) == b.cached_prefix_len([1, 2, 3, 4, 9, 9, 1])
    with pytest.raises(ValueError, match="'r' has 3 reserved tokens; 4 cannot be computed"):
        a.mark_computed_each(["p", "r"], [5, 4])
