"""Attention that reads K/V through block tables (PagedAttention), in plain torch.

The cache holds K/V by physical block (`PagedKVCache`); a sequence's keys are the blocks its
table names, in order, cut at its context length. Both functions gather those blocks with one
`index_select` per tensor and hand them to `scaled_dot_product_attention`, so the same code
runs on CPU and CUDA and picks torch's fused kernels; no custom kernel.

Shapes (S sequences, T new tokens, H query heads, Hkv = H / g key/value heads, D head dim):

    decode:  q [S, H, D]  -> out [S, H, D]; each sequence's one query sits at its last position
    prefill: q [T, H, D]  -> out [T, H, D]; sequence i's queries are q[qsl[i]:qsl[i+1]], its
             keys are context_lens[i] tokens (cached prefix + these new ones, already written)

The caller writes the new tokens' K/V (`PagedKVCache.write` at the slot mapping) before it
calls attention, so a query always sees its own key.

The gather is a copy that contiguous attention does not make, and decode attention is
memory-bound, so the copy is the cost of paging here (a fused kernel reads blocks in place).
On CPU decode gathers a few sequences at a time (`DEFAULT_CPU_GATHER_BYTES`) so the copy is
still in cache when attention reads it; prefill gathers one sequence at a time.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from engines.kv.cache import PagedKVCache


def _sdpa_has_gqa() -> bool:
    try:
        return "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):  # a builtin without a signature: probe instead
        try:
            x = torch.zeros(1, 2, 1, 1)
            F.scaled_dot_product_attention(x, x[:, :1], x[:, :1], enable_gqa=True)
            return True
        except TypeError:
            return False


_SDPA_HAS_GQA = _sdpa_has_gqa()


def sdpa_gqa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """`scaled_dot_product_attention` for q [.., H, Lq, D] and k/v [.., Hkv, Lk, D], H = g*Hkv.

    Uses torch's `enable_gqa` where it exists (torch >= 2.5), else repeats K/V heads.
    """
    n_heads, n_kv_heads = q.shape[-3], k.shape[-3]
    if n_heads == n_kv_heads:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale
        )
    if _SDPA_HAS_GQA:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=True
        )
    group = n_heads // n_kv_heads
    k = k.repeat_interleave(group, dim=-3)
    v = v.repeat_interleave(group, dim=-3)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale
    )


def _host_ints(values: torch.Tensor | list[int]) -> list[int]:
    """Python ints (one device sync for a tensor, not one per element)."""
    return values.tolist() if isinstance(values, torch.Tensor) else [int(x) for x in values]


def _check_heads(q: torch.Tensor, cache: PagedKVCache) -> None:
    n_heads, d_head = q.shape[-2], q.shape[-1]
    if d_head != cache.d_head:
        raise ValueError(f"q has head dim {d_head}, the cache {cache.d_head}")
    if n_heads % cache.n_kv_heads:
        raise ValueError(
            f"{n_heads} query heads is not a multiple of the cache's {cache.n_kv_heads} KV heads"
        )


DEFAULT_CPU_GATHER_BYTES = 4 << 20
"""On CPU, decode gathers the K (and V) of at most this many bytes at a time, so the
gathered copy stays in cache between the gather and the attention that reads it."""


def paged_attention_decode(
    q: torch.Tensor,
    cache: PagedKVCache,
    layer: int,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float | None = None,
    max_context_len: int | None = None,
    max_gather_bytes: int | None = None,
) -> torch.Tensor:
    """One new query per sequence, batched.

    q [S, H, D]; block_tables int [S, max_blocks]; context_lens int [S] (>= 1: keys to read,
    the query's own included). `max_context_len` (a host int) saves a device sync on CUDA.
    Sequences are taken in groups whose gathered K stays under `max_gather_bytes` (default
    `DEFAULT_CPU_GATHER_BYTES` on CPU, everything at once elsewhere); each group is one
    batched attention call. Returns [S, H, D].
    """
    _check_heads(q, cache)
    n_seqs, n_heads, d_head = q.shape
    if n_seqs == 0:
        return q.new_empty(q.shape)
    bs = cache.block_size
    if max_context_len is None:
        max_context_len = int(context_lens.max())
    n_blk = -(-max_context_len // bs)
    tables = block_tables[:, :n_blk]
    lens = context_lens.to(device=q.device)
    if max_gather_bytes is None and q.device.type == "cpu":
        max_gather_bytes = DEFAULT_CPU_GATHER_BYTES
    group = n_seqs
    if max_gather_bytes is not None:
        bytes_per_seq = n_blk * bs * cache.n_kv_heads * d_head * cache.kv.element_size()
        group = max(1, min(n_seqs, max_gather_bytes // bytes_per_seq))
    if group == n_seqs:
        return _decode_group(q, cache, layer, tables, lens, scale)
    out = torch.empty_like(q)
    for s0 in range(0, n_seqs, group):
        s1 = s0 + group
        out[s0:s1] = _decode_group(q[s0:s1], cache, layer, tables[s0:s1], lens[s0:s1], scale)
    return out


def _decode_group(
    q: torch.Tensor,
    cache: PagedKVCache,
    layer: int,
    tables: torch.Tensor,
    lens: torch.Tensor,
    scale: float | None,
) -> torch.Tensor:
    n_seqs, _, d_head = q.shape
    n_keys = tables.shape[1] * cache.block_size
    k, v = cache.gather(layer, tables)
    k = k.view(n_seqs, n_keys, cache.n_kv_heads, d_head).transpose(1, 2)
    v = v.view(n_seqs, n_keys, cache.n_kv_heads, d_head).transpose(1, 2)
    mask = torch.arange(n_keys, device=q.device) < lens[:, None]  # [S, n_keys]
    out = sdpa_gqa(q.unsqueeze(2), k, v, attn_mask=mask[:, None, None, :], scale=scale)
    return out.squeeze(2)


def paged_attention_prefill(
    q: torch.Tensor,
    cache: PagedKVCache,
    layer: int,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor | list[int],
    context_lens: torch.Tensor | list[int],
    positions: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """Causal attention for several new tokens per sequence, over cached + new keys.

    q [T, H, D] flat over sequences; `query_start_loc` [S+1] cumulative query counts;
    `context_lens` [S] keys per sequence after this step (a cached prefix plus the new
    tokens). A query at position p attends keys 0..p; positions default to the last
    n_query positions of each sequence, `positions` [T] overrides them. One vectorised
    attention call per sequence. Returns [T, H, D].
    """
    _check_heads(q, cache)
    n_tokens, n_heads, d_head = q.shape
    starts = _host_ints(query_start_loc)
    lens = _host_ints(context_lens)
    if len(starts) != len(lens) + 1 or starts[-1] != n_tokens:
        raise ValueError(
            f"query_start_loc {starts} does not split {n_tokens} query tokens over "
            f"{len(lens)} sequences"
        )
    bs = cache.block_size
    out = torch.empty_like(q)
    for i, n_ctx in enumerate(lens):
        a, b = starts[i], starts[i + 1]
        n_q = b - a
        if n_q == 0:
            continue
        if n_q > n_ctx:
            raise ValueError(f"sequence {i} has {n_q} queries but only {n_ctx} keys")
        n_blk = -(-n_ctx // bs)
        k, v = cache.gather(layer, block_tables[i, :n_blk])
        k = k.view(n_blk * bs, cache.n_kv_heads, d_head)[:n_ctx].transpose(0, 1)
        v = v.view(n_blk * bs, cache.n_kv_heads, d_head)[:n_ctx].transpose(0, 1)
        qi = q[a:b].transpose(0, 1)  # [H, n_q, D]
        if positions is None and n_q == n_ctx:
            o = sdpa_gqa(qi, k, v, is_causal=True, scale=scale)
        else:
            if positions is None:
                pos = torch.arange(n_ctx - n_q, n_ctx, device=q.device)
            else:
                pos = positions[a:b].to(q.device)
            mask = torch.arange(n_ctx, device=q.device)[None, :] <= pos[:, None]
            o = sdpa_gqa(qi, k, v, attn_mask=mask, scale=scale)
        out[a:b] = o.transpose(0, 1)
    return out
