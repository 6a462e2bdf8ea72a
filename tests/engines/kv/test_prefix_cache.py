"""Automatic prefix caching: exact hits, the recomputed last token, lazy LRU eviction, collisions."""

from __future__ import annotations

import pytest

from inferlab.engines.kv import BlockManager, KVOutOfMemoryError
from inferlab.engines.kv import prefix_cache as pc

SYSTEM = [11, 12, 13, 14, 15, 16, 17, 18]  # two blocks of 4


def refs(mgr: BlockManager) -> list[int]:
    return [mgr.ref_count(i) for i in range(mgr.n_blocks)]


def run(mgr: BlockManager, seq, tokens, n_new_tokens=None) -> int:
    """Allocate `seq` and compute its whole reservation at once (a prefill): the K/V is
    written, so its full blocks join the prefix cache. Returns the cached token count."""
    n_cached = mgr.allocate(seq, tokens, n_new_tokens)
    mgr.mark_computed(seq, mgr.num_tokens(seq))
    return n_cached


def test_shared_system_prompt_reuses_exactly_its_full_blocks():
    mgr = BlockManager(8, block_size=4)
    assert run(mgr, "a", SYSTEM + [100, 101, 102]) == 0
    assert mgr.block_table("a") == [0, 1, 2]
    assert mgr.cached_block_ids() == [0, 1]  # the partial block 2 is not cached
    assert run(mgr, "b", SYSTEM + [200, 201]) == 8
    assert mgr.block_table("b") == [0, 1, 3]
    assert mgr.num_cached_tokens("b") == 8
    assert refs(mgr)[:4] == [2, 2, 1, 1]
    assert mgr.prefix_hit_tokens == 8 and mgr.prefix_query_tokens == 21
    assert mgr.prefix_hit_rate == pytest.approx(8 / 21)
    assert mgr.free_block_ids() == [4, 5, 6, 7]


def test_the_last_prompt_token_is_always_recomputed():
    mgr = BlockManager(8, block_size=4)
    run(mgr, "a", SYSTEM + [100])
    # the prompt IS the two cached blocks: only the first may be served, the second holds
    # the last token and is computed again in a fresh block
    assert run(mgr, "b", SYSTEM) == 4
    assert mgr.block_table("b") == [0, 3]
    assert refs(mgr)[:4] == [2, 1, 1, 1]
    # the recomputed copy duplicates block 1's content: it is not cached a second time
    assert mgr.cached_block_ids() == [0, 1]
    assert run(mgr, "c", SYSTEM[:4]) == 0  # a one-block prompt can never hit
    assert mgr.block_table("c") == [4]


def test_a_prefix_continues_past_a_recomputed_duplicate():
    mgr = BlockManager(8, block_size=4)
    run(mgr, "a", SYSTEM + [100])  # [0, 1, 2]
    run(mgr, "b", SYSTEM)  # [0, 3]; block 3 duplicates block 1, uncached
    mgr.append_tokens("b", [21, 22, 23, 24])  # block 4 [21..24] chains after the SYSTEM prefix
    mgr.mark_computed("b", 12)
    assert mgr.block_table("b") == [0, 3, 4]
    assert mgr.cached_block_ids() == [0, 1, 4]
    assert run(mgr, "c", SYSTEM + [21, 22, 23, 24, 99]) == 12
    assert mgr.block_table("c") == [0, 1, 4, 5]


def test_freed_blocks_stay_cached_and_a_hit_leaves_the_queue_from_the_middle():
    mgr = BlockManager(8, block_size=4)
    run(mgr, "a", SYSTEM + [100, 101])  # [0, 1, 2]
    run(mgr, "x", list(range(500, 504)))  # [3]
    mgr.free("a")
    assert mgr.free_block_ids() == [4, 5, 6, 7, 2, 1, 0]
    assert mgr.stats().blocks_cached_free == 2
    assert run(mgr, "b", SYSTEM + [300]) == 8
    assert mgr.block_table("b") == [0, 1, 4]
    assert mgr.free_block_ids() == [5, 6, 7, 2]
    assert refs(mgr)[:5] == [1, 1, 0, 1, 1]
    assert mgr.pool.n_evictions == 0


def test_eviction_is_lazy_and_least_recently_freed_first():
    mgr = BlockManager(6, block_size=2)
    run(mgr, "A", [1, 2, 3, 4, 9])  # [0, 1, 2]; cached 0=[1,2], 1=[1,2|3,4]
    run(mgr, "B", [5, 6, 7, 8, 9])  # [3, 4, 5]; cached 3=[5,6], 4=[5,6|7,8]
    assert mgr.cached_block_ids() == [0, 1, 3, 4]
    mgr.free("A")
    mgr.free("B")
    assert mgr.free_block_ids() == [2, 1, 0, 5, 4, 3]
    assert mgr.stats().blocks_cached_free == 4
    # C needs two blocks: the head (2, never cached) and then 1, whose content is evicted now
    assert run(mgr, "C", [20, 21, 22]) == 0
    assert mgr.block_table("C") == [2, 1]
    assert mgr.pool.n_evictions == 1
    assert mgr.pool.blocks[1].token_ids is None  # C's partial [22]: uncached
    assert mgr.cached_block_ids() == [0, 2, 3, 4]  # block 2 now caches C's [20, 21]
    assert mgr.pool.blocks[2].token_ids == (20, 21)
    assert mgr.free_block_ids() == [0, 5, 4, 3]
    # A again: its first block survived (0), its second was evicted (1): one block hits;
    # the hit is taken from the head, then 5 (uncached) and 4 (evicted) are handed out
    assert run(mgr, "A2", [1, 2, 3, 4, 9]) == 2
    assert mgr.block_table("A2") == [0, 5, 4]
    assert mgr.pool.n_evictions == 2
    assert mgr.free_block_ids() == [3]
    # B again: its first block (3) is still cached but the rest does not fit
    assert not mgr.can_allocate([5, 6, 7, 8, 9])
    with pytest.raises(KVOutOfMemoryError):
        run(mgr, "B2", [5, 6, 7, 8, 9])
    assert mgr.free_block_ids() == [3] and mgr.pool.blocks[3].token_ids == (5, 6)
    # a two-token prompt that hits block 3 fits even with no other free block
    assert mgr.can_allocate([5, 6, 0]) is False  # hit 3, but needs 1 more
    assert mgr.can_allocate([5, 6]) is True  # no hit (last token), takes block 3


def test_disabled_prefix_caching_never_hits():
    mgr = BlockManager(8, block_size=4, enable_prefix_caching=False)
    run(mgr, "a", SYSTEM + [1])
    assert run(mgr, "b", SYSTEM + [1]) == 0
    assert mgr.block_table("b") == [3, 4, 5]
    assert mgr.cached_block_ids() == []
    assert mgr.prefix_hit_rate == 0.0


def test_colliding_hashes_never_give_a_false_hit(monkeypatch):
    monkeypatch.setattr(pc, "hash_block_tokens", lambda parent, tokens: 42)
    mgr = BlockManager(16, block_size=2)
    run(mgr, "a", [1, 2, 3, 4, 5])  # [0, 1, 2]; blocks 0 and 1 both under hash 42
    assert len(mgr.pool.cache) == 2
    # different first block: same hash, different tokens
    assert run(mgr, "b", [9, 9, 3, 4, 5]) == 0
    # same tokens [3, 4] as a's block 1, same hash, but a different prefix before them
    assert run(mgr, "c", [3, 4, 5]) == 0
    assert mgr.block_table("c") == [6, 7]
    # b's [9, 9] is now cached too; [9, 9 | 1, 2]: block 0 hits b's block 3; [1, 2] exists
    # in the cache (a's block 0) but after the root, not after [9, 9]
    assert run(mgr, "d", [9, 9, 1, 2, 7]) == 2
    assert mgr.block_table("d")[0] == 3
    # the true prefix still hits through the collisions
    assert run(mgr, "e", [1, 2, 3, 4, 6]) == 4
    assert mgr.block_table("e")[:2] == [0, 1]


def test_chained_hash_is_deterministic_and_depends_on_the_prefix():
    h0 = pc.hash_block_tokens(pc.ROOT_HASH, (1, 2, 3))
    assert h0 == pc.hash_block_tokens(pc.ROOT_HASH, (1, 2, 3))
    assert pc.hash_block_tokens(h0, (4,)) != pc.hash_block_tokens(pc.ROOT_HASH, (4,))


def test_reset_prefix_cache_drops_only_free_entries():
    mgr = BlockManager(8, block_size=4)
    run(mgr, "a", SYSTEM + [1])
    run(mgr, "x", list(range(50, 58)) + [1])
    mgr.free("a")
    assert mgr.pool.reset_prefix_cache() == 2
    assert mgr.cached_block_ids() == [3, 4]
    assert run(mgr, "b", SYSTEM + [1]) == 0


def test_chunked_prefill_reserves_the_cached_prefix_plus_one_chunk():
    mgr = BlockManager(16, block_size=4)
    run(mgr, "a", SYSTEM + [1])
    prompt = SYSTEM + list(range(40, 52))  # 20 tokens; 8 cached
    assert mgr.can_allocate(prompt, n_new_tokens=5)
    assert run(mgr, "b", prompt, n_new_tokens=5) == 8
    assert mgr.num_tokens("b") == 13
    assert mgr.block_table("b") == [0, 1, 3, 4]
    assert mgr.prefix_query_tokens == 9 + 20 and mgr.prefix_hit_tokens == 8
    assert mgr.append_tokens("b", prompt[13:18]) == []
    mgr.mark_computed("b", 18)
    assert mgr.append_tokens("b", prompt[18:]) == []
    mgr.mark_computed("b", 20)
    assert mgr.block_table("b") == [0, 1, 3, 4, 5]
    assert mgr.token_ids("b") == prompt
    # its blocks were registered as each chunk was computed: the whole prompt is now a prefix
    assert run(mgr, "c", prompt + [7]) == 20
    assert mgr.block_table("c") == [0, 1, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="n_new_tokens"):
        run(mgr, "d", prompt, n_new_tokens=0)


def test_a_block_is_cached_when_its_kv_is_computed_not_when_it_is_reserved():
    """Chunked prefill: a prompt reserved whole but computed 4 tokens a step. Another request
    with the same prefix may only hit the blocks whose K/V is written."""
    mgr = BlockManager(16, block_size=4)
    prompt = SYSTEM + [100, 101, 102, 103, 104]  # blocks [0, 1, 2, 3]; 3 full
    assert mgr.allocate("a", prompt) == 0
    assert mgr.cached_block_ids() == []  # reserved, nothing written yet
    assert mgr.allocate("b", prompt) == 0  # no hit on blocks nobody computed
    assert mgr.block_table("b") == [4, 5, 6, 7]
    mgr.mark_computed("a", 6)  # the first chunk ran: block 0 written, block 1 half
    assert mgr.cached_block_ids() == [0]
    assert mgr.allocate("c", prompt) == 4
    assert mgr.block_table("c") == [0, 8, 9, 10]
    mgr.mark_computed("a", 3)  # counts never go back
    mgr.mark_computed("a", 13)  # the rest ran: blocks 1 and 2 full and written
    assert mgr.cached_block_ids() == [0, 1, 2]
    assert mgr.allocate("d", prompt) == 12
    assert mgr.block_table("d") == [0, 1, 2, 11]
    assert mgr.prefix_hit_tokens == 16
    with pytest.raises(ValueError, match="14 cannot be computed"):
        mgr.mark_computed("a", 14)


def test_a_fork_registers_the_blocks_it_computes_after_its_parent():
    mgr = BlockManager(16, block_size=4)
    mgr.allocate("p", SYSTEM + [1, 2])  # [0, 1, 2]; nothing computed yet
    mgr.fork("p", "c")
    mgr.mark_computed("c", 10)  # the child's step wrote the shared blocks
    assert mgr.cached_block_ids() == [0, 1]
    mgr.mark_computed("p", 10)  # the same blocks: already cached, nothing changes
    assert mgr.cached_block_ids() == [0, 1] and len(mgr.pool.cache) == 2
    mgr.append_tokens("c", [3, 4])  # copy-on-write of the shared partial block 2 -> 3
    mgr.mark_computed("c", 12)
    assert mgr.block_table("c") == [0, 1, 3] and mgr.cached_block_ids() == [0, 1, 3]
    assert run(mgr, "q", SYSTEM + [1, 2, 3, 4, 5]) == 12
