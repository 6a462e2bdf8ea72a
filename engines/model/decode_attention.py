"""A fast path for decode attention (one new query per sequence) over the paged KV cache.

`engines.kv.paged_attention.paged_attention_decode` is the reference; this computes the
same thing with less work per layer, which matters because a decode step runs attention once
per layer (30 times for SmolLM2) on tiny tensors, where fixed costs dominate:

- the flat slot of every key each sequence reads,
  slot[s, p] = block_table[s, p // block_size] * block_size + p % block_size,
  is computed ONCE per step and shared by all layers;
- grouped-query attention needs no K/V expansion: the g = H / Hkv query heads that share a
  K/V head become g query rows of that head, q [S, H, D] -> [S, Hkv, g, D], so plain
  `scaled_dot_product_attention` over [S, Hkv, n_keys, D] keys does it;
- with one sequence (or equal lengths) there is no padding and no mask.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engines.kv.attention_metadata import AttentionMetadata
from engines.kv.cache import PagedKVCache


class DecodeAttention:
    """Built once per decode step from its metadata; called once per layer."""

    def __init__(self, meta: AttentionMetadata, block_size: int, device: torch.device) -> None:
        lens = meta.context_lens_host
        n_keys = max(lens)
        pos = torch.arange(n_keys, device=device)
        tables = meta.block_tables.to(device=device, dtype=torch.int64)
        slots = tables[:, pos // block_size] * block_size + pos % block_size  # [S, n_keys]
        self.slots = slots.reshape(-1)
        self.n_seqs = len(lens)
        self.n_keys = n_keys
        self.mask = None
        if min(lens) != n_keys:
            ctx = meta.context_lens.to(device=device)
            self.mask = (pos[None, :] < ctx[:, None])[:, None, None, :]  # [S, 1, 1, n_keys]

    def __call__(self, q: torch.Tensor, cache: PagedKVCache, layer: int,
                 scale: float | None = None) -> torch.Tensor:
        """q [S, H, D] -> [S, H, D]; keys 0..context_len-1 of each sequence."""
        n_kv, d = cache.n_kv_heads, cache.d_head
        s, n_heads = q.shape[0], q.shape[1]
        shape = (s, self.n_keys, n_kv, d)
        k = cache.k[layer].view(-1, n_kv, d).index_select(0, self.slots).view(shape)
        v = cache.v[layer].view(-1, n_kv, d).index_select(0, self.slots).view(shape)
        q4 = q.reshape(s, n_kv, n_heads // n_kv, d)
        out = F.scaled_dot_product_attention(q4, k.transpose(1, 2), v.transpose(1, 2),
                                             attn_mask=self.mask, scale=scale)
        return out.reshape(s, n_heads, d)
