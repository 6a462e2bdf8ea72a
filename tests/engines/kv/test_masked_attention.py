"""Masked paged attention (token trees) against plain SDPA with the same boolean mask on
random tensors in shuffled blocks; single-slot copies in the cache (plain and quantized);
BlockManager.replace_tokens refusing slots the prefix cache or another sequence can read."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from inferlab.engines.kv import (
    BlockManager,
    MaskedAttention,
    PagedKVCache,
    paged_attention_masked,
)
from inferlab.engines.kv.cache import QuantizedPagedKVCache


def scattered(n_keys: int, n_kv_heads: int, d_head: int, block_size: int, seed: int):
    """A 2-layer cache with random K/V of one sequence of n_keys tokens in shuffled blocks."""
    g = torch.Generator().manual_seed(seed)
    n_blk = -(-n_keys // block_size)
    n_blocks = n_blk + 3
    cache = PagedKVCache(2, n_blocks, block_size, n_kv_heads, d_head)
    cache.kv.normal_(generator=g)  # garbage in unused slots too
    table = torch.randperm(n_blocks, generator=g)[:n_blk]
    pos = torch.arange(n_keys)
    slots = table[pos // block_size] * block_size + pos % block_size
    k = torch.randn(n_keys, n_kv_heads, d_head, generator=g)
    v = torch.randn(n_keys, n_kv_heads, d_head, generator=g)
    cache.write(1, slots, k, v)
    return cache, table, k, v, g


def plain(q, k, v, mask, scale):
    """SDPA over contiguous K/V [n, Hkv, D], K/V heads repeated, the same bool mask."""
    g = q.shape[1] // k.shape[1]
    kk, vv = (x.repeat_interleave(g, dim=1).transpose(0, 1) for x in (k, v))
    return F.scaled_dot_product_attention(q.transpose(0, 1), kk, vv, attn_mask=mask,
                                          scale=scale).transpose(0, 1)


def tree_mask(n_prefix: int, parents: list[int]) -> torch.Tensor:
    n = len(parents)
    mask = torch.zeros(n, n_prefix + n, dtype=torch.bool)
    mask[:, :n_prefix] = True
    for i, parent in enumerate(parents):
        mask[i, n_prefix + i] = True
        if parent >= 0:
            mask[i] |= mask[parent]
    return mask


@pytest.mark.parametrize("n_heads, n_kv_heads, block_size", [(4, 2, 4), (3, 3, 16), (6, 1, 8)])
def test_a_tree_mask_matches_plain_masked_attention(n_heads, n_kv_heads, block_size):
    parents = [-1, 0, 0, 1, -1, 4, 2]  # two top-level candidates, branching below
    n_prefix, d_head = 13, 8
    n_keys = n_prefix + len(parents)
    cache, table, k, v, g = scattered(n_keys, n_kv_heads, d_head, block_size, seed=n_heads)
    mask = tree_mask(n_prefix, parents)
    q = torch.randn(len(parents), n_heads, d_head, generator=g)
    plan = MaskedAttention(cache, table, mask)
    for out in (plan(q, 1, 0.3), paged_attention_masked(q, cache, 1, table, mask, 0.3)):
        torch.testing.assert_close(out, plain(q, k, v, mask, 0.3), rtol=1e-5, atol=1e-5)
    # a node sees nothing outside its ancestry: changing a sibling's key changes nothing
    out = plan(q, 1, 0.3)
    sibling = n_prefix + 1  # node 1, not an ancestor of node 2
    slot = table[sibling // block_size] * block_size + sibling % block_size
    cache.write(1, slot[None], torch.randn(1, n_kv_heads, d_head), torch.randn(1, n_kv_heads,
                                                                                 d_head))
    torch.testing.assert_close(plan(q, 1, 0.3)[2], out[2])
    assert not torch.allclose(plan(q, 1, 0.3)[1], out[1])


def test_a_random_mask_matches_plain_masked_attention():
    cache, table, k, v, g = scattered(21, 2, 8, 4, seed=9)
    mask = torch.rand(6, 21, generator=g) < 0.4
    mask[:, 0] = True  # every row attends something
    q = torch.randn(6, 4, 8, generator=g)
    torch.testing.assert_close(paged_attention_masked(q, cache, 1, table, mask),
                               plain(q, k, v, mask, None), rtol=1e-5, atol=1e-5)


def test_bad_masks_are_refused():
    cache, table, *_ = scattered(8, 1, 8, 4, seed=1)
    with pytest.raises(ValueError, match="bool"):
        MaskedAttention(cache, table, torch.ones(2, 8))
    with pytest.raises(ValueError, match="at least one key"):
        MaskedAttention(cache, table, torch.zeros(2, 8, dtype=torch.bool))
    with pytest.raises(ValueError, match="need 3 blocks"):
        MaskedAttention(cache, table, torch.ones(2, 9, dtype=torch.bool))
    with pytest.raises(ValueError, match="3 queries for a mask of 2"):
        MaskedAttention(cache, table, torch.ones(2, 8, dtype=torch.bool))(
            torch.zeros(3, 2, 8), 0)


@pytest.mark.parametrize("quantized", [False, True])
def test_copy_slots_moves_single_tokens_in_every_layer_and_head(quantized):
    cls = QuantizedPagedKVCache if quantized else PagedKVCache
    cache = cls(2, 3, 4, 2, 8)
    g = torch.Generator().manual_seed(3)
    for layer in range(2):
        cache.write(layer, torch.arange(12), torch.randn(12, 2, 8, generator=g),
                    torch.randn(12, 2, 8, generator=g))

    def token(slot: int) -> list[torch.Tensor]:
        rows = cache.block_rows(torch.tensor([slot // 4]))
        out = []
        for layer in range(2):
            k, v = cache.gather(layer, rows)
            out += [k[:, 0, slot % 4].clone(), v[:, 0, slot % 4].clone()]
        return out

    before = {s: token(s) for s in range(12)}
    cache.copy_slots(torch.tensor([5, 9, 2]), torch.tensor([2, 3, 5]))  # 2 and 5 overlap
    for dst, src in ((2, 5), (3, 9), (5, 2)):  # sources read before any write
        for a, b in zip(token(dst), before[src], strict=True):
            torch.testing.assert_close(a, b)
    for s in (0, 1, 4, 6, 7, 8, 9, 10, 11):
        for a, b in zip(token(s), before[s], strict=True):
            torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="one length"):
        cache.copy_slots(torch.tensor([1, 2]), torch.tensor([3]))


def test_replace_tokens_changes_only_slots_nobody_else_can_read():
    mgr = BlockManager(8, block_size=4)
    mgr.allocate("a", list(range(10)))
    mgr.mark_computed("a", 10)  # blocks 0, 1 registered
    mgr.append_tokens("a", [50, 51, 52, 53])
    mgr.replace_tokens("a", 10, [60, 61])
    assert mgr.token_ids("a") == list(range(10)) + [60, 61, 52, 53]
    assert mgr.stats().tokens_logical == 14
    with pytest.raises(ValueError, match="prefix cache"):
        mgr.replace_tokens("a", 7, [1])
    with pytest.raises(ValueError, match="cannot replace"):
        mgr.replace_tokens("a", 13, [1, 2])
    mgr.fork("a", "b")
    with pytest.raises(ValueError, match="shared or cached"):
        mgr.replace_tokens("a", 12, [1])
