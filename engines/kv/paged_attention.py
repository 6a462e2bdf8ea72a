"""Attention that reads K/V through block tables (PagedAttention), in plain torch.

The cache holds K/V by physical block, head-major (`PagedKVCache`); a sequence's keys are the
blocks its table names, in order, cut at its context length. Attention gathers those blocks
(`PagedKVCache.gather`: one `index_select` for K and V of every head, giving each head's keys
as one contiguous run) and hands them to `scaled_dot_product_attention`, so the same code runs
on CPU and CUDA and picks torch's fused kernels; no custom kernel.

Shapes (S sequences, T new tokens, H query heads, Hkv = H / g key/value heads, D head dim):

    decode:  q [S, H, D]  -> out [S, H, D]; each sequence's one query sits at its last position
    prefill: q [T, H, D]  -> out [T, H, D]; sequence i's queries are q[qsl[i]:qsl[i+1]], its
             keys are context_lens[i] tokens (cached prefix + these new ones, already written)

The caller writes the new tokens' K/V (`PagedKVCache.write` at the slot mapping) before it
calls attention, so a query always sees its own key.

Decode runs once per layer on small tensors, so `DecodeAttention` plans a step once (which
blocks each group of sequences gathers, key counts, masks) and every layer reuses the plan.
Grouped-query attention needs no K/V expansion: the g query heads that share a K/V head are g
query rows of it, q [S, H, D] -> [Hkv, S, g, D]. The gather is a copy that contiguous
attention does not make, and decode attention is memory-bound, so that copy is the cost of
paging here (a fused kernel reads blocks in place); on CPU a few sequences are gathered at a
time (`DEFAULT_CPU_GATHER_BYTES`) so the copy is still in cache when attention reads it.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from inferlab.engines.kv.cache import PagedKVCache


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


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                     window: int = 0, softcap: float = 0.0, q_pos: torch.Tensor | None = None,
                     k_pos: torch.Tensor | None = None) -> torch.Tensor:
    """Attention written out, for what SDPA's causal mask does not express: q [n_q, H, D] at
    positions `q_pos`, k / v [n_k, Hkv, D] at `k_pos` (default: one whole sequence, 0..n-1).
    A query at p sees the keys at j <= p, and with `window` only p - window < j; scores are
    soft-capped, cap · tanh(s / cap), where `softcap`. GQA heads repeated; fp32; q's dtype out."""
    if k_pos is None:
        k_pos = torch.arange(k.shape[0], device=q.device)
    q_pos = k_pos if q_pos is None else q_pos
    allowed = k_pos[None, :] <= q_pos[:, None]
    if window:
        allowed &= k_pos[None, :] > q_pos[:, None] - window
    group = q.shape[1] // k.shape[1]
    qh = q.float().transpose(0, 1)
    kh = k.float().transpose(0, 1).repeat_interleave(group, dim=0)
    vh = v.float().transpose(0, 1).repeat_interleave(group, dim=0)
    scores = qh @ kh.transpose(1, 2) * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    scores = scores.masked_fill(~allowed[None], float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vh).transpose(0, 1).to(q.dtype)


def sdpa_gqa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """`scaled_dot_product_attention` for q [.., H, Lq, D] and k/v [.., Hkv, Lk, D], H = g*Hkv.

    Uses torch's `enable_gqa` where it exists (torch >= 2.5), else repeats K/V heads. 3-d
    inputs run as a batch of one: torch's CPU kernel takes a slower path for 3-d ones
    (measured 0.75 against 0.37 ms, 9 heads x 100 tokens x 64, one thread).
    """
    if q.dim() == 3:
        mask = attn_mask if attn_mask is None or attn_mask.dim() < 3 else attn_mask[None]
        return sdpa_gqa(q[None], k[None], v[None], mask, is_causal, scale)[0]
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


def _host_ints(values: torch.Tensor | Sequence[int]) -> list[int]:
    """Python ints (one device sync for a tensor, not one per element)."""
    if isinstance(values, torch.Tensor):
        values = values.tolist()
    return [int(x) for x in values]


def _check_heads(q: torch.Tensor, cache: PagedKVCache) -> None:
    n_heads, d_head = q.shape[-2], q.shape[-1]
    if d_head != cache.d_head:
        raise ValueError(f"q has head dim {d_head}, the cache {cache.d_head}")
    if n_heads % cache.n_kv_heads:
        raise ValueError(
            f"{n_heads} query heads is not a multiple of the cache's {cache.n_kv_heads} KV heads"
        )


DEFAULT_CPU_GATHER_BYTES = 4 << 20
"""On CPU, decode gathers the K and V of at most this many bytes at a time (whole sequences,
at least one), so the gathered copy is still in cache when attention reads it."""


class DecodeAttention:
    """Decode attention (one new query per sequence) through block tables, planned once a step.

    Built from the step's block tables (int [S, max_blocks]) and context lengths (keys per
    sequence, the query's own included, >= 1; host ints spare a device sync); called once per
    layer. Sequences are taken in groups whose gathered K and V stay under `max_gather_bytes`
    (default `DEFAULT_CPU_GATHER_BYTES` on CPU, everything at once elsewhere); per group:

        keys = blocks table[s, :ceil(n_keys / block_size)] of each head, cut at n_keys
             = the group's longest context; shorter sequences mask keys at or past their length
        out  = SDPA(q as [Hkv, S_group, g, D], keys [Hkv, S_group, n_keys, D], values alike)
    """

    def __init__(
        self,
        cache: PagedKVCache,
        block_tables: torch.Tensor,
        context_lens: torch.Tensor | Sequence[int],
        max_gather_bytes: int | None = None,
    ) -> None:
        self.cache = cache
        lens = _host_ints(context_lens)
        if len(lens) != block_tables.shape[0]:
            raise ValueError(f"{block_tables.shape[0]} block tables but {len(lens)} lengths")
        if lens and min(lens) < 1:
            raise ValueError("every decoding sequence attends at least its own key")
        self.n_seqs = len(lens)
        device = cache.device
        tables = block_tables.to(device=device, dtype=torch.int64)
        bs = cache.block_size
        if max_gather_bytes is None and device.type == "cpu":
            max_gather_bytes = DEFAULT_CPU_GATHER_BYTES
        group = max(self.n_seqs, 1)
        if max_gather_bytes is not None and lens:
            bytes_per_seq = -(-max(lens) // bs) * cache.bytes_per_block // cache.n_layers
            group = max(1, min(group, max_gather_bytes // bytes_per_seq))
        self.groups: list[tuple[int, int, int, torch.Tensor, torch.Tensor | None]] = []
        """(first sequence, end, n_keys, `block_rows` of its blocks, mask [1, n, 1, n_keys])."""
        for s0 in range(0, self.n_seqs, group):
            s1 = min(s0 + group, self.n_seqs)
            n_keys = max(lens[s0:s1])
            rows = cache.block_rows(tables[s0:s1, : -(-n_keys // bs)])
            mask = None
            if min(lens[s0:s1]) != n_keys:
                ctx = torch.tensor(lens[s0:s1], device=device)
                mask = (torch.arange(n_keys, device=device) < ctx[:, None])[None, :, None, :]
            self.groups.append((s0, s1, n_keys, rows, mask))

    def __call__(self, q: torch.Tensor, layer: int, scale: float | None = None) -> torch.Tensor:
        """q [S, H, D] -> [S, H, D]: each query over keys 0..context_len-1 of its sequence."""
        cache = self.cache
        _check_heads(q, cache)
        n_seqs, n_heads, d_head = q.shape
        if n_seqs != self.n_seqs:
            raise ValueError(f"{n_seqs} queries for a plan of {self.n_seqs} sequences")
        if not self.groups:
            return q.new_empty(q.shape)
        n_kv = cache.n_kv_heads
        qg = q.reshape(n_seqs, n_kv, n_heads // n_kv, d_head).transpose(0, 1)  # [Hkv, S, g, D]
        outs = []
        for s0, s1, n_keys, rows, mask in self.groups:
            k, v = cache.gather(layer, rows)  # [Hkv, n * n_blocks, block_size, D]
            k = k.view(n_kv, s1 - s0, -1, d_head)[:, :, :n_keys]
            v = v.view(n_kv, s1 - s0, -1, d_head)[:, :, :n_keys]
            outs.append(
                F.scaled_dot_product_attention(qg[:, s0:s1], k, v, attn_mask=mask, scale=scale)
            )
        out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)  # [Hkv, S, g, D]
        return out.transpose(0, 1).reshape(n_seqs, n_heads, d_head)


def paged_attention_decode(
    q: torch.Tensor,
    cache: PagedKVCache,
    layer: int,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor | Sequence[int],
    scale: float | None = None,
    max_gather_bytes: int | None = None,
) -> torch.Tensor:
    """One new query per sequence, one layer: `DecodeAttention` planned and run once.

    q [S, H, D]; block_tables int [S, max_blocks]; context_lens [S] (>= 1). Returns [S, H, D].
    A model step plans once with `DecodeAttention` and calls it per layer instead.
    """
    return DecodeAttention(cache, block_tables, context_lens, max_gather_bytes)(q, layer, scale)


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
        k, v = cache.gather(layer, cache.block_rows(block_tables[i, :n_blk]))
        k = k.view(cache.n_kv_heads, n_blk * bs, d_head)[:, :n_ctx]
        v = v.view(cache.n_kv_heads, n_blk * bs, d_head)[:, :n_ctx]
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


class MaskedAttention:
    """Attention for one sequence's new tokens under an explicit boolean mask, through its block
    table: planned once a step (the block rows to gather, the mask), called once per layer.

    `mask` [T, n_keys] (True: query t attends key j) over the sequence's first n_keys reserved
    tokens, whose K/V is in the cache (a cached prefix plus these T tokens, already written
    at their slots). Token trees use it: each node attends the committed prefix, its
    ancestors and itself, nothing else (a causal mask is the special case of a chain).

        out = SDPA(q [H, T, D], keys [Hkv, n_keys, D], values alike, attn_mask=mask)

    A query row with no key to attend is refused (its softmax would be over nothing).
    """

    def __init__(self, cache: PagedKVCache, block_table: torch.Tensor,
                 mask: torch.Tensor) -> None:
        if mask.dim() != 2 or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a 2-d bool tensor [queries, keys], got "
                             f"{mask.dtype} of shape {tuple(mask.shape)}")
        n_keys = mask.shape[1]
        if n_keys < 1 or not bool(mask.any(dim=1).all()):
            raise ValueError("every query must attend at least one key")
        n_blk = -(-n_keys // cache.block_size)
        table = block_table.reshape(-1)
        if table.numel() < n_blk:
            raise ValueError(f"{n_keys} keys need {n_blk} blocks, the table names "
                             f"{table.numel()}")
        self.cache = cache
        self.n_keys = n_keys
        self.rows = cache.block_rows(table[:n_blk])
        self.mask = mask.to(cache.device)

    def __call__(self, q: torch.Tensor, layer: int, scale: float | None = None) -> torch.Tensor:
        """q [T, H, D] -> [T, H, D]."""
        cache = self.cache
        _check_heads(q, cache)
        if q.shape[0] != self.mask.shape[0]:
            raise ValueError(f"{q.shape[0]} queries for a mask of {self.mask.shape[0]} rows")
        d_head = q.shape[-1]
        k, v = cache.gather(layer, self.rows)
        k = k.reshape(cache.n_kv_heads, -1, d_head)[:, : self.n_keys]
        v = v.reshape(cache.n_kv_heads, -1, d_head)[:, : self.n_keys]
        out = sdpa_gqa(q.transpose(0, 1), k, v, attn_mask=self.mask, scale=scale)
        return out.transpose(0, 1)


def paged_attention_masked(
    q: torch.Tensor,
    cache: PagedKVCache,
    layer: int,
    block_table: torch.Tensor,
    mask: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One sequence's queries q [T, H, D] over its cached keys under `mask` [T, n_keys] (bool,
    True: attend), one layer: `MaskedAttention` planned and run once. Returns [T, H, D]."""
    return MaskedAttention(cache, block_table, mask)(q, layer, scale)
