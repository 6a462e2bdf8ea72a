"""BlockManager.truncate: rolling a sequence back after rejected speculative drafts. Every test
names the exact blocks released, their ref counts, the free queue and the prefix-cache entries."""

from __future__ import annotations

import pytest

from inferlab.engines.kv import BlockManager

PROMPT = list(range(100, 108))  # two full blocks of 4
DRAFTS = [900, 901, 902, 903, 904]  # K = 5: fill block 2 and start block 3


def refs(mgr: BlockManager) -> list[int]:
    return [mgr.ref_count(i) for i in range(mgr.n_blocks)]


def drafted(mgr: BlockManager, seq="a") -> BlockManager:
    """`seq` = prompt + 5 drafts, all computed (a verify step marks what it ran)."""
    mgr.allocate(seq, PROMPT)
    mgr.mark_computed(seq, 8)
    assert mgr.append_tokens(seq, DRAFTS) == []
    mgr.mark_computed(seq, 13)
    return mgr


def test_blocks_past_the_cut_go_back_to_the_pool_last_first():
    mgr = drafted(BlockManager(8, block_size=4))
    assert mgr.block_table("a") == [0, 1, 2, 3]
    assert mgr.cached_block_ids() == [0, 1, 2]  # block 2 holds drafts 900..903
    assert mgr.truncate("a", 9) == [3]  # prompt + one accepted draft
    assert mgr.block_table("a") == [0, 1, 2]
    assert mgr.token_ids("a") == PROMPT + [900]
    assert refs(mgr) == [1, 1, 1, 0, 0, 0, 0, 0]
    assert [b.n_tokens for b in mgr.pool.blocks[:3]] == [4, 4, 1]
    assert mgr.free_block_ids() == [4, 5, 6, 7, 3]
    assert mgr.cached_block_ids() == [0, 1]  # the kept half of block 2 left the cache
    stats = mgr.stats()
    assert (stats.blocks_used, stats.slots_filled, stats.tokens_logical) == (3, 9, 9)


def test_a_cut_on_a_block_boundary_releases_the_blocks_after_it():
    mgr = drafted(BlockManager(8, block_size=4))
    assert mgr.truncate("a", 8) == [3, 2]  # every draft rejected
    assert mgr.block_table("a") == [0, 1]
    assert mgr.free_block_ids() == [4, 5, 6, 7, 3, 2]
    assert mgr.cached_block_ids() == [0, 1]
    assert mgr.stats().blocks_cached_free == 0  # block 2 is a plain free block, not a hit
    assert mgr.truncate("a", 8) == []  # nothing to cut


def test_a_later_prompt_never_hits_a_block_that_held_rejected_drafts():
    mgr = drafted(BlockManager(8, block_size=4))
    mgr.truncate("a", 9)  # 900 accepted, 901..904 rejected
    mgr.append_tokens("a", [555, 556, 557])  # the target's own tokens rewrite block 2
    mgr.mark_computed("a", 12)
    assert mgr.block_table("a") == [0, 1, 2]
    # a prompt holding the rejected drafts finds the shared prompt and nothing more
    assert mgr.allocate("b", PROMPT + DRAFTS) == 8
    assert mgr.block_table("b")[:2] == [0, 1]
    assert 2 not in mgr.block_table("b")
    # the accepted continuation is a true hit on the rewritten block
    assert mgr.allocate("c", PROMPT + [900, 555, 556, 557, 1]) == 12
    assert mgr.block_table("c")[:3] == [0, 1, 2]


def test_the_chain_rewinds_so_blocks_written_after_the_cut_register_under_their_prefix():
    mgr = drafted(BlockManager(8, block_size=4))
    mgr.truncate("a", 6)  # back inside the prompt's block 1: it leaves the cache too
    assert mgr.cached_block_ids() == [0]
    mgr.append_tokens("a", [7, 7, 7, 7, 7, 7])
    mgr.mark_computed("a", 12)
    assert mgr.block_table("a") == [0, 1, 4]  # 4: the free queue's head
    assert mgr.cached_block_ids() == [0, 1, 4]
    tokens = PROMPT[:6] + [7] * 6
    assert mgr.allocate("b", tokens + [1]) == 12
    assert mgr.block_table("b")[:3] == mgr.block_table("a")


def test_a_shared_registered_block_keeps_its_entry_and_the_next_append_copies_it():
    mgr = BlockManager(8, block_size=4)
    mgr.allocate("a", PROMPT + [900, 901, 902, 903])
    mgr.mark_computed("a", 12)
    mgr.allocate("b", PROMPT + [900, 901, 902, 903, 1])  # hits blocks 0, 1, 2
    assert mgr.block_table("b") == [0, 1, 2, 3]
    assert mgr.truncate("a", 9) == []
    assert mgr.cached_block_ids() == [0, 1, 2]  # b still holds block 2's content
    assert refs(mgr)[:4] == [2, 2, 2, 1]
    assert mgr.append_tokens("a", [555]) == [(2, 4)]  # copy-on-write, b's block untouched
    assert mgr.block_table("a") == [0, 1, 4]
    assert refs(mgr)[:5] == [2, 2, 1, 1, 1]


def test_a_shared_block_past_the_cut_is_only_dereferenced():
    mgr = drafted(BlockManager(8, block_size=4))
    mgr.fork("a", "b")
    assert mgr.truncate("a", 8) == [3, 2]
    assert refs(mgr)[:4] == [2, 2, 1, 1]  # b holds blocks 2 and 3
    assert mgr.cached_block_ids() == [0, 1, 2]
    assert mgr.free_block_ids() == [4, 5, 6, 7]


def test_truncate_to_nothing_releases_every_block():
    mgr = drafted(BlockManager(8, block_size=4))
    assert mgr.truncate("a", 0) == [3, 2, 1, 0]
    assert mgr.block_table("a") == [] and mgr.num_tokens("a") == 0
    assert mgr.cached_block_ids() == []
    mgr.append_tokens("a", PROMPT)
    assert mgr.block_table("a") == [4, 5]


@pytest.mark.parametrize("n", [-1, 14, 2.0, True, None])
def test_a_bad_cut_is_refused_and_changes_nothing(n):
    mgr = drafted(BlockManager(8, block_size=4))
    with pytest.raises(ValueError, match="cannot truncate it to"):
        mgr.truncate("a", n)
    assert mgr.num_tokens("a") == 13 and mgr.block_table("a") == [0, 1, 2, 3]
    assert mgr.cached_block_ids() == [0, 1, 2]
    with pytest.raises(KeyError, match="unknown sequence"):
        mgr.truncate("zz", 1)
