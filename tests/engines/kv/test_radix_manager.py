"""The block manager with the radix tree: the issue's exact hit counts, partial-block copies,
eviction under pressure, and the same requests through hash and radix."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kv import BlockManager, KVOutOfMemoryError
from inferlab.engines.kv.pool_state import CACHED_FREE, USED

SYSTEM = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]  # 2.5 blocks of 4


def run(mgr: BlockManager, seq, tokens) -> int:
    """Allocate, prefill the whole prompt, free: one request alone. Returns its cached tokens."""
    n_cached = mgr.allocate(seq, tokens)
    mgr.mark_computed(seq, len(tokens))
    mgr.free(seq)
    return n_cached


def lcp_with_any(prompt, earlier) -> int:
    best = 0
    for q in earlier:
        n = 0
        while n < min(len(prompt), len(q)) and prompt[n] == q[n]:
            n += 1
        best = max(best, n)
    return best


def test_a_hit_inside_a_block_is_served_by_a_copy():
    mgr = BlockManager(16, block_size=4, prefix_cache="radix")
    assert mgr.allocate("a", SYSTEM + [100, 101]) == 0
    mgr.mark_computed("a", 12)
    assert mgr.block_table("a") == [0, 1, 2]
    # whole prompt blocks join the tree as they are computed: a later prompt hits them
    assert mgr.radix.tree.n_cached_tokens == 12
    assert mgr.allocate("b", SYSTEM + [200]) == 10  # 2 whole blocks shared, 2 tokens copied
    assert mgr.block_table("b") == [0, 1, 3]
    assert mgr.take_copies() == [(2, 3)] and mgr.take_copies() == []
    assert mgr.num_cached_tokens("b") == 10


def test_the_same_requests_by_hash_and_by_radix():
    """Nothing evicted, no overlap: radix caches min(L, len - 1), hash the whole blocks of it."""
    prompts = [SYSTEM + [1, 2, 3], SYSTEM + [1, 9, 9], SYSTEM[:7], SYSTEM + [1, 2, 3, 4, 5]]
    # L = 0, 11, 7, 13; len - 1 = 12, 12, 6, 14
    for mode, expected in (("radix", [0, 11, 6, 13]), ("hash", [0, 8, 4, 12])):
        mgr = BlockManager(64, block_size=4, prefix_cache=mode)
        assert [run(mgr, i, p) for i, p in enumerate(prompts)] == expected, mode
    mgr = BlockManager(64, block_size=4, prefix_cache="none")
    assert [run(mgr, i, p) for i, p in enumerate(prompts)] == [0, 0, 0, 0]


@settings(max_examples=80, deadline=None)
@given(prompts=st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=20), min_size=1,
                        max_size=10),
       block_size=st.sampled_from([1, 2, 4]))
def test_cached_tokens_are_the_issues_definition(prompts, block_size):
    """Request i alone after 0..i-1, pool never short: radix (page 1) caches min(L_i, len_i-1)
    tokens, hash floor(min(L_i, len_i-1) / block_size) * block_size, L_i the longest common
    prefix with any earlier prompt."""
    radix = BlockManager(256, block_size=block_size, prefix_cache="radix")
    hashed = BlockManager(256, block_size=block_size, prefix_cache="hash")
    for i, p in enumerate(prompts):
        want = min(lcp_with_any(p, prompts[:i]), len(p) - 1)
        assert run(radix, i, p) == want
        assert run(hashed, i, p) == want // block_size * block_size


def test_pressure_evicts_unlocked_leaves_lru_first():
    mgr = BlockManager(6, block_size=4, prefix_cache="radix")
    run(mgr, "a", [1] * 8 + [2])   # 3 blocks (a, a, a')
    run(mgr, "b", [5] * 8 + [6])   # 3 more
    assert mgr.pool.n_free == 0 and mgr.n_free_blocks == 6
    st = mgr.stats()
    assert st.blocks_cached_free == 6 and st.blocks_used == 0
    # c hits a's 8 tokens and needs 1 fresh block: the least recently used unlocked leaf is
    # a's last token (b's path was inserted later), so exactly that block is evicted
    assert run(mgr, "c", [1] * 8 + [3]) == 8
    assert mgr.radix.n_evicted_blocks == 1 and mgr.stats().evictions == 1
    assert mgr.radix.tree.match_len([1] * 8 + [2]) == 8  # a's tail gone, its prefix kept
    assert mgr.radix.tree.match_len([5] * 8 + [6]) == 9  # b untouched
    assert mgr.radix.tree.match_len([1] * 8 + [3]) == 9  # c cached in the freed block


def test_a_locked_prefix_is_not_evicted_and_not_counted_free():
    mgr = BlockManager(4, block_size=4, prefix_cache="radix")
    run(mgr, "a", [1] * 8 + [2])  # 3 blocks, tree only
    assert mgr.n_free_blocks == 4
    mgr.allocate("b", [1] * 8 + [7])  # shares 2 blocks, copies nothing, 1 fresh
    assert mgr.num_cached_tokens("b") == 8
    # b locks the path: its 2 shared blocks are in b's table; only a's last block (tree
    # only, unlocked) is evictable, plus the one free block
    assert mgr.n_free_blocks == 1
    with pytest.raises(KVOutOfMemoryError):
        mgr.allocate("c", [9] * 9)
    assert mgr.radix.tree.match_len([1] * 8) == 8
    state = mgr.pool_state()  # the tree's references are not a second holder
    assert state.state[mgr.block_table("b")].tolist() == [USED, USED, USED]
    assert state.state[2] == CACHED_FREE and state.ref_count.tolist() == [1, 1, 0, 1]


def test_parallel_prompts_share_while_running():
    """Few-shot requests that arrive together: the first one's computed prompt blocks are hit
    by the next before the first finishes (SGLang caches unfinished requests too)."""
    mgr = BlockManager(32, block_size=4, prefix_cache="radix")
    shared = list(range(100, 116))
    mgr.allocate("a", shared + [1, 2])
    mgr.mark_computed("a", 18)
    assert mgr.allocate("b", shared + [3, 4]) == 16
    assert mgr.block_table("b")[:4] == mgr.block_table("a")[:4]
    assert mgr.append_token("a", 5) is None  # a's last block is not the tree's: no copy
    assert mgr.block_table("b")[4] != mgr.block_table("a")[4]


def test_a_match_that_starts_in_another_paths_block_counts_that_block_as_pinned():
    """A hit of [5, 7, 7] whose first token lies in "a"'s block: locking the hit pins that
    block as well as the shared one, so neither can be evicted for the new blocks; the prompt
    is refused as out of memory (it was let through, then found no free block)."""
    mgr = BlockManager(4, block_size=3, prefix_cache="radix")
    run(mgr, "a", [5, 9])       # block 0 holds [5, 9]
    run(mgr, "b", [5, 7, 7])    # [5] hit inside block 0: copied into block 1, which holds [5, 7, 7]
    assert mgr.pool.n_free == 2 and mgr.radix.n_evictable == 2
    prompt = [5, 7, 7] + [8] * 7  # 4 blocks: 1 shared, 3 new; free 2, evictable 0 once pinned
    assert [b.block_id for b in mgr.radix.pinned_by(mgr.radix.peek(prompt))] == [0, 1]
    assert not mgr.can_allocate(prompt)
    with pytest.raises(KVOutOfMemoryError):
        mgr.allocate("c", prompt)
    assert mgr.pool.n_free == 2 and mgr.radix.n_evictable == 2  # nothing locked or evicted
    assert mgr.can_allocate([5, 7, 7] + [8] * 6) and mgr.allocate("d", [5, 7, 7] + [8] * 6) == 3
