"""The paged allocator, vLLM style: every test names the exact blocks, counts and queue order."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.kv import BlockManager, KVCapacityError, KVOutOfMemoryError, blocks_for_budget


def refs(mgr: BlockManager) -> list[int]:
    return [mgr.ref_count(i) for i in range(mgr.n_blocks)]


def toks(n: int, start: int = 1000) -> list[int]:
    """n distinct token ids (no accidental prefix hits)."""
    return list(range(start, start + n))


def test_blocks_are_handed_out_in_id_order():
    mgr = BlockManager(8, block_size=4)
    assert mgr.allocate("a", toks(10)) == 0
    assert mgr.block_table("a") == [0, 1, 2]
    assert mgr.allocate("b", toks(4, 2000)) == 0
    assert mgr.block_table("b") == [3]
    assert refs(mgr) == [1, 1, 1, 1, 0, 0, 0, 0]
    assert mgr.free_block_ids() == [4, 5, 6, 7]
    assert [b.n_tokens for b in mgr.pool.blocks[:4]] == [4, 4, 2, 4]


def test_append_fills_the_last_block_then_takes_the_free_queue_head():
    mgr = BlockManager(8, block_size=4)
    mgr.allocate("a", toks(10))
    assert mgr.append_token("a", 1) is None
    assert mgr.append_token("a", 2) is None
    assert mgr.block_table("a") == [0, 1, 2]
    assert mgr.append_token("a", 3) is None
    assert mgr.block_table("a") == [0, 1, 2, 3]
    assert mgr.num_tokens("a") == 13
    assert mgr.free_block_ids() == [4, 5, 6, 7]
    assert mgr.append_tokens("a", [4, 5, 6, 7, 8]) == []
    assert mgr.block_table("a") == [0, 1, 2, 3, 4]
    assert mgr.pool.blocks[4].n_tokens == 2


def test_fork_shares_every_block():
    mgr = BlockManager(8, block_size=4)
    mgr.allocate("p", toks(10))
    mgr.fork("p", "c")
    assert mgr.block_table("c") == [0, 1, 2]
    assert mgr.token_ids("c") == mgr.token_ids("p")
    assert refs(mgr)[:4] == [2, 2, 2, 0]
    assert mgr.free_block_ids() == [3, 4, 5, 6, 7]


def test_append_into_a_shared_block_copies_it_on_write():
    mgr = BlockManager(8, block_size=4)
    mgr.allocate("p", toks(10))
    mgr.fork("p", "c")
    assert mgr.append_token("c", 7) == (2, 3)
    assert mgr.block_table("c") == [0, 1, 3]
    assert mgr.block_table("p") == [0, 1, 2]  # the parent's table is untouched
    assert refs(mgr)[:5] == [2, 2, 1, 1, 0]
    assert mgr.pool.blocks[3].n_tokens == 3  # two copied tokens + the new one
    assert mgr.pool.blocks[2].n_tokens == 2
    # the parent's block is its own again: no second copy
    assert mgr.append_token("p", 8) is None
    assert mgr.block_table("p") == [0, 1, 2]
    assert mgr.free_block_ids() == [4, 5, 6, 7]


def test_fork_at_a_block_boundary_needs_no_copy():
    mgr = BlockManager(8, block_size=4)
    mgr.allocate("p", toks(8))
    mgr.fork("p", "c")
    assert mgr.append_token("c", 1) is None
    assert mgr.block_table("c") == [0, 1, 2]
    assert mgr.block_table("p") == [0, 1]
    assert refs(mgr)[:3] == [2, 2, 1]


def test_copy_on_write_counts_the_copy_block_in_can_append():
    mgr = BlockManager(3, block_size=4)
    mgr.allocate("p", toks(6))
    mgr.fork("p", "c")
    assert mgr.can_append("c", 2)  # one CoW copy (block 2)
    assert not mgr.can_append("c", 3)  # the copy plus a new block
    assert mgr.append_tokens("c", [1, 2]) == [(1, 2)]
    with pytest.raises(KVOutOfMemoryError):
        mgr.append_token("c", 3)
    assert mgr.block_table("c") == [0, 2]
    assert mgr.num_tokens("c") == 8


def test_free_releases_the_tail_first():
    mgr = BlockManager(8, block_size=4)
    mgr.allocate("a", toks(10))
    mgr.allocate("b", toks(4, 2000))
    mgr.free("a")
    assert mgr.free_block_ids() == [4, 5, 6, 7, 2, 1, 0]
    mgr.free("b")
    assert mgr.free_block_ids() == [4, 5, 6, 7, 2, 1, 0, 3]
    assert refs(mgr) == [0] * 8
    assert "a" not in mgr and mgr.seq_ids == []


def test_free_of_a_forked_parent_keeps_the_shared_blocks():
    mgr = BlockManager(8, block_size=4)
    mgr.allocate("p", toks(10))
    mgr.fork("p", "c")
    assert mgr.append_token("c", 1) == (2, 3)
    mgr.free("p")
    assert refs(mgr)[:4] == [1, 1, 0, 1]
    assert mgr.free_block_ids() == [4, 5, 6, 7, 2]
    mgr.free("c")
    assert mgr.free_block_ids() == [4, 5, 6, 7, 2, 3, 1, 0]


def test_capacity_never_vs_not_now():
    mgr = BlockManager(4, block_size=4)
    with pytest.raises(KVCapacityError, match="17 tokens needs 5 KV blocks.*4 blocks"):
        mgr.allocate("big", toks(17))
    with pytest.raises(ValueError):  # KVCapacityError is a ValueError
        mgr.can_allocate(17)
    assert mgr.can_allocate(16)
    mgr.allocate("a", toks(8))
    assert not mgr.can_allocate(16)
    before = mgr.free_block_ids()
    with pytest.raises(KVOutOfMemoryError):
        mgr.allocate("b", toks(16, 5000))
    assert "b" not in mgr and mgr.free_block_ids() == before
    mgr.allocate("b", toks(8, 5000))
    with pytest.raises(KVOutOfMemoryError):
        mgr.append_token("b", 1)
    assert mgr.num_tokens("b") == 8 and mgr.block_table("b") == [2, 3]
    mgr.free("a")
    mgr.append_tokens("b", toks(8, 7000))
    assert mgr.block_table("b") == [2, 3, 1, 0]
    with pytest.raises(KVCapacityError, match="sequence 'b'"):
        mgr.append_token("b", 1)


def test_bad_calls():
    mgr = BlockManager(4, block_size=4)
    with pytest.raises(ValueError, match="empty"):
        mgr.allocate("a", [])
    mgr.allocate("a", [1])
    with pytest.raises(ValueError, match="already"):
        mgr.allocate("a", [1])
    with pytest.raises(ValueError, match="already"):
        mgr.fork("a", "a")
    with pytest.raises(KeyError):
        mgr.free("nope")
    with pytest.raises(KeyError):
        mgr.append_token("nope", 1)
    with pytest.raises(ValueError):
        BlockManager(0)


def test_blocks_for_budget():
    assert blocks_for_budget(10_000, 1_000) == 10
    assert blocks_for_budget(10_999, 1_000) == 10
    assert blocks_for_budget(999, 1_000) == 0
    with pytest.raises(ValueError):
        blocks_for_budget(10, 0)


def test_slot_mapping_and_block_table_tensor():
    mgr = BlockManager(4, block_size=4)
    mgr.allocate("a", toks(4))  # [0]
    mgr.allocate("b", toks(2, 2000))  # [1]
    mgr.allocate("c", toks(2, 3000))  # [2]
    mgr.free("a")  # free queue [3, 0]
    mgr.append_tokens("b", [1, 2, 3])  # fills block 1, then block 3
    assert mgr.block_table("b") == [1, 3]
    slots = mgr.slot_mapping("b", [0, 3, 4])
    assert slots.dtype == torch.int64
    assert slots.tolist() == [4, 7, 12]
    assert mgr.slot_mapping("b", torch.tensor([1, 2])).tolist() == [5, 6]
    with pytest.raises(IndexError):
        mgr.slot_mapping("b", [5])
    table = mgr.block_table_tensor(["b", "c"])
    assert table.dtype == torch.int32
    assert table.tolist() == [[1, 3], [2, 0]]
    assert mgr.context_lens_tensor(["b", "c"]).tolist() == [5, 2]


def test_stats_count_sharing_and_waste():
    mgr = BlockManager(8, block_size=4, bytes_per_slot=10)
    mgr.allocate("p", toks(10))
    mgr.mark_computed("p", 10)  # blocks 0 and 1 full and written: prefix-cached
    mgr.fork("p", "c")
    s = mgr.stats(step=3)
    assert (s.step, s.n_seqs, s.blocks_used, s.blocks_free, s.blocks_cached_free) == (3, 2, 3, 5, 0)
    assert (s.slots_reserved, s.slots_filled, s.tokens_logical) == (12, 10, 20)
    assert (s.shared_blocks, s.shared_saved_slots, s.shared_saved_bytes) == (3, 12, 120)
    assert s.slots_internal_waste == 2 and s.waste_frac == pytest.approx(2 / 12)
    mgr.append_token("c", 5)
    s = mgr.stats()
    assert (s.blocks_used, s.shared_blocks, s.slots_filled) == (4, 2, 13)
    mgr.free("p")
    mgr.free("c")
    s = mgr.stats()
    assert (s.blocks_used, s.blocks_free, s.blocks_cached_free) == (0, 6, 2)
    assert s.to_dict()["waste_frac"] == 0.0


def test_pool_state_names_every_block():
    from inferlab.engines.kv.pool_state import CACHED_FREE, FREE, SHARED, USED

    mgr = BlockManager(8, block_size=4)
    mgr.allocate("x", toks(8, 3000) + [1])  # [0, 1, 2]
    mgr.mark_computed("x", 9)  # 0 and 1 cached
    mgr.allocate("a", toks(6))  # [3, 4]
    mgr.fork("a", "b")
    mgr.append_token("b", 9)  # CoW: b -> [3, 5]
    mgr.free("x")  # queue [6, 7, 2, 1, 0]
    st = mgr.pool_state()
    assert st.seq_ids == ("a", "b")
    assert st.block_tables == ((3, 4), (3, 5))
    assert st.state.tolist() == [CACHED_FREE, CACHED_FREE, FREE, SHARED, USED, USED, FREE, FREE]
    assert st.owner.tolist() == [-1, -1, -1, 0, 0, 1, -1, -1]
    assert st.ref_count.tolist() == [0, 0, 0, 2, 1, 1, 0, 0]
    assert st.n_tokens.tolist()[3:6] == [4, 2, 3]
    assert st.free_queue.tolist() == [6, 7, 2, 1, 0]
    assert st.owners_of(3) == ["a", "b"]
