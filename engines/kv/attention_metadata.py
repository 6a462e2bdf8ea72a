"""What a model forward needs to read and write the paged cache for one flat batch of tokens.

A step runs, for each scheduled sequence, `query_len` of its reserved tokens: by default its
last ones (a whole prompt, the rest of a prompt after a cached prefix, or one decode token),
or, given `query_starts`, those from a start position on (a chunk of a prompt reserved whole:
chunked prefill). Flattened over sequences:

    positions[t]     absolute position of token t (RoPE and the causal mask use it)
    slot_mapping[t]  flat cache slot its K/V is written to
    query_start_loc  [S+1] where each sequence's tokens start in the flat batch
    context_lens     [S] keys each sequence attends to after this step
    block_tables     [S, max_blocks] physical blocks, padded

A model step plans its attention once, `attend = PagedAttention(meta, cache)`, then each
layer does: q, k, v = proj(x); rope(q, k, positions); `cache.write(layer, meta.slot_mapping,
k, v)`; `attend(q, layer)`. `paged_attention(q, cache, layer, meta)` is the same for one call.

A model whose layers keep their K/V in several groups (full attention and sliding windows,
`kv_groups`) gets a `GroupedMetadata`: one `AttentionMetadata` per group, each over that
group's block tables and slots, the same tokens, positions and lengths in all; layer i writes
and attends through `groups[layer_group[i]]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inferlab.engines import kernels
from inferlab.engines.kernels import paged_attention as native_attention
from inferlab.engines.kernels.paged_attention import PagedPlan
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.kv.cache import PagedKVCache
from inferlab.engines.kv.paged_attention import (
    DecodeAttention,
    masked_attention,
    paged_attention_prefill,
)


@dataclass(frozen=True)
class AttentionMetadata:
    seq_ids: tuple
    query_lens: tuple[int, ...]
    """New tokens per sequence this step (host ints)."""
    context_lens_host: tuple[int, ...]
    """Keys per sequence after this step (host ints)."""
    positions: torch.Tensor
    slot_mapping: torch.Tensor
    query_start_loc: torch.Tensor
    context_lens: torch.Tensor
    block_tables: torch.Tensor

    @property
    def n_tokens(self) -> int:
        return sum(self.query_lens)

    @property
    def is_decode(self) -> bool:
        """Every sequence runs exactly one token."""
        return all(n == 1 for n in self.query_lens)

    @property
    def max_context_len(self) -> int:
        return max(self.context_lens_host, default=0)


@dataclass(frozen=True)
class GroupedMetadata:
    """One step's metadata per layer group: `groups[g]` over group g's block tables and
    slot mapping, `layer_group[i]` the group of model layer i. The tokens, their positions,
    query starts and context lengths are every group's (read from the first)."""

    groups: tuple[AttentionMetadata, ...]
    layer_group: tuple[int, ...]

    @property
    def seq_ids(self) -> tuple:
        return self.groups[0].seq_ids

    @property
    def query_lens(self) -> tuple[int, ...]:
        return self.groups[0].query_lens

    @property
    def context_lens_host(self) -> tuple[int, ...]:
        return self.groups[0].context_lens_host

    @property
    def positions(self) -> torch.Tensor:
        return self.groups[0].positions

    @property
    def query_start_loc(self) -> torch.Tensor:
        return self.groups[0].query_start_loc

    @property
    def context_lens(self) -> torch.Tensor:
        return self.groups[0].context_lens

    @property
    def block_tables(self) -> torch.Tensor:
        """The first group's (the full-attention layers', where the model has them)."""
        return self.groups[0].block_tables

    @property
    def n_tokens(self) -> int:
        return self.groups[0].n_tokens

    @property
    def is_decode(self) -> bool:
        return self.groups[0].is_decode

    @property
    def max_context_len(self) -> int:
        return self.groups[0].max_context_len


def build_attention_metadata(
    manager: BlockManager,
    seq_ids: Sequence[object],
    query_lens: Sequence[int],
    device: torch.device | str | None = None,
    query_starts: Sequence[int] | None = None,
) -> AttentionMetadata:
    """Metadata for running `query_lens[i]` reserved tokens of each `seq_ids[i]`.

    By default a sequence runs its LAST `query_lens[i]` reserved tokens. With `query_starts`
    it runs positions [query_starts[i], query_starts[i] + query_lens[i]) (its K/V before
    `query_starts[i]` already in the cache), and attends to that chunk's end, not to the
    reserved length: a chunk of a prompt reserved whole (chunked prefill).
    """
    if len(seq_ids) != len(query_lens):
        raise ValueError("one query length per sequence")
    if query_starts is not None and len(query_starts) != len(seq_ids):
        raise ValueError("one query start per sequence")
    positions, slots, ctx = [], [], []
    for i, (seq_id, n_q) in enumerate(zip(seq_ids, query_lens, strict=True)):
        start, n_ctx = query_span(manager, seq_id, n_q,
                                  None if query_starts is None else query_starts[i])
        pos = torch.arange(start, n_ctx, dtype=torch.int64)
        positions.append(pos)
        slots.append(manager.slot_mapping(seq_id, pos))
        ctx.append(n_ctx)
    starts = [0]
    for n_q in query_lens:
        starts.append(starts[-1] + n_q)

    def put(t: torch.Tensor) -> torch.Tensor:
        return t if device is None else t.to(device)

    empty = torch.empty(0, dtype=torch.int64)
    return AttentionMetadata(
        seq_ids=tuple(seq_ids),
        query_lens=tuple(int(n) for n in query_lens),
        context_lens_host=tuple(ctx),
        positions=put(torch.cat(positions) if positions else empty),
        slot_mapping=put(torch.cat(slots) if slots else empty),
        query_start_loc=put(torch.tensor(starts, dtype=torch.int32)),
        context_lens=put(torch.tensor(ctx, dtype=torch.int32)),
        block_tables=manager.block_table_tensor(seq_ids, device=device),
    )


def query_span(manager: BlockManager, seq_id: object, n_q: int, start: int | None
               ) -> tuple[int, int]:
    """(first position, context after the step) of running `n_q` reserved tokens of
    `seq_id` from `start` (None: its last n_q); ValueError when they are not reserved."""
    n_reserved = manager.num_tokens(seq_id)
    start = n_reserved - n_q if start is None else int(start)
    n_ctx = start + n_q
    if not (n_q >= 1 and start >= 0 and n_ctx <= n_reserved):
        raise ValueError(f"sequence {seq_id!r} has {n_reserved} reserved tokens; cannot run "
                         f"{n_q} of them from position {start}")
    return start, n_ctx


class PagedAttention:
    """Attention for one step's flat batch through the paged cache, planned once, called per layer.

    On the native kernel path (engines/kernels), a step whose sequences each run at most
    `MAX_NATIVE_QUERIES` tokens (decode, K+1 verification, short chunks) over an fp32 cache
    reads K/V in place through the block tables (`engines.kernels.paged_attention.PagedPlan`).
    Otherwise one-token sequences run as one batched decode (`DecodeAttention`, its gather plan
    built here) and the others (prompts, prompt chunks) as prefill. q [T, H, D] in the
    metadata's flat token order -> [T, H, D].
    """

    def __init__(self, meta: AttentionMetadata, cache: PagedKVCache,
                 path: str | None = None, window: int = 0) -> None:
        """`path`: the kernel path ("native" or "torch"; default the process's,
        `engines.kernels.default_path()`): a model passes the one it was built for.
        `window` > 0: every layer this serves attends within it (one sliding layer group):
        a step whose context outgrew it plans nothing (`windowed_attention` runs)."""
        self.meta = meta
        self.cache = cache
        self.decode: DecodeAttention | None = None
        self.decode_rows: torch.Tensor | None = None
        """Flat token rows of the decoding sequences (None: every row decodes)."""
        self.prefill: tuple[torch.Tensor, torch.Tensor, list[int], list[int]] | None = None
        """(token rows, sequence indices, query start locations, context lengths)."""
        self.native: PagedPlan | None = None
        if window and meta.max_context_len > window:
            return
        self.native = native_attention.plan(
            kernels.resolve(path), cache.native_view(), meta.query_lens, meta.block_tables,
            meta.query_start_loc, meta.positions)
        if self.native is not None:
            return
        if meta.is_decode:
            self.decode = DecodeAttention(cache, meta.block_tables, meta.context_lens_host)
            return
        starts = [0]
        for n_q in meta.query_lens:
            starts.append(starts[-1] + n_q)
        decode = [i for i, n in enumerate(meta.query_lens) if n == 1]
        prefill = [i for i, n in enumerate(meta.query_lens) if n != 1]
        table_device = meta.block_tables.device
        if decode:
            idx = torch.tensor(decode, device=table_device)
            self.decode = DecodeAttention(
                cache, meta.block_tables[idx], [meta.context_lens_host[i] for i in decode]
            )
            self.decode_rows = torch.tensor([starts[i] for i in decode], device=cache.device)
        rows: list[int] = []
        sub_starts = [0]
        for i in prefill:
            rows.extend(range(starts[i], starts[i + 1]))
            sub_starts.append(sub_starts[-1] + meta.query_lens[i])
        self.prefill = (
            torch.tensor(rows, device=cache.device),
            torch.tensor(prefill, device=table_device),
            sub_starts,
            [meta.context_lens_host[i] for i in prefill],
        )

    def __call__(self, q: torch.Tensor, layer: int, scale: float | None = None,
                 window: int = 0, softcap: float = 0.0) -> torch.Tensor:
        """Attention of q [T, H, D] in `layer`; `window` > 0 limits each query at position p to
        the keys at p - window + 1 .. p (a sliding-window layer), `softcap` > 0 caps the
        scores at c·tanh(s / c) (Gemma 2)."""
        if softcap or (window and self.meta.max_context_len > window):
            return windowed_attention(q, self.cache, layer, self.meta, scale, window, softcap)
        if self.native is not None:
            return self.native(q, layer, scale).to(q.dtype)
        if self.prefill is None:
            assert self.decode is not None
            return self.decode(q, layer, scale)
        out = torch.empty_like(q)
        if self.decode is not None:
            rows = self.decode_rows
            out[rows] = self.decode(q[rows], layer, scale)
        rows, idx, starts, lens = self.prefill
        out[rows] = paged_attention_prefill(
            q[rows], self.cache, layer, self.meta.block_tables[idx], starts, lens, scale=scale
        )
        return out


def windowed_attention(q: torch.Tensor, cache: PagedKVCache, layer: int,
                       meta: AttentionMetadata, scale: float | None, window: int,
                       softcap: float) -> torch.Tensor:
    """Attention with a sliding window and / or soft-capped scores, sequence by sequence:
    each sequence's keys from the first one its earliest query sees are gathered through its
    block table and masked (causal, and within `window` of each query). The reference path;
    a window the context has not outgrown takes the paged kernels instead."""
    out = torch.empty_like(q)
    bs, start = cache.block_size, 0
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    positions = meta.positions.to(q.device)
    for i, n_q in enumerate(meta.query_lens):
        rows = slice(start, start + n_q)
        start += n_q
        ctx = meta.context_lens_host[i]
        q_pos = positions[rows]
        first = max(0, int(q_pos.min()) - window + 1) if window else 0
        first_block = first // bs
        n_blocks = -(-ctx // bs) - first_block
        blocks = meta.block_tables[i, first_block:first_block + n_blocks]
        k, v = cache.gather(layer, cache.block_rows(blocks))
        k = k.reshape(cache.n_kv_heads, -1, cache.d_head)[:, first - first_block * bs:
                                                         ctx - first_block * bs]
        v = v.reshape(cache.n_kv_heads, -1, cache.d_head)[:, first - first_block * bs:
                                                         ctx - first_block * bs]
        out[rows] = masked_attention(q[rows], k.transpose(0, 1), v.transpose(0, 1), scale,
                                     window, softcap, q_pos,
                                     torch.arange(first, ctx, device=q.device))
    return out


def paged_attention(
    q: torch.Tensor,
    cache: PagedKVCache,
    layer: int,
    meta: AttentionMetadata,
    scale: float | None = None,
) -> torch.Tensor:
    """Attention for a mixed batch, one layer: `PagedAttention(meta, cache)(q, layer, scale)`.

    q [T, H, D] in the metadata's flat token order; returns [T, H, D]. A model step builds
    `PagedAttention` once and calls it per layer instead.
    """
    return PagedAttention(meta, cache)(q, layer, scale)
