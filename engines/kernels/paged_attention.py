"""Paged attention read in place on the native library (`paged_attention.c`): every query
row reads its sequence's K/V through the block table, no gather and no padding, the g query
heads of a GQA group sharing each K/V row, online softmax in fp32.

`plan(path, view, ...)` is the door: a `PagedPlan` where the native path applies to this step
and this cache (`supports`), else None and the caller runs torch's attention
(`engines.kv.PagedAttention`: gather, then SDPA). A plan is built once per step from the
step's block tables, query start locations and positions (the tensors the kernel reads, made
contiguous int32/int64 once) and called once per layer with that layer's K/V. It covers decode
(one query per sequence), K+1 verification and short prefill chunks alike: query t of a
sequence attends keys 0..positions[t].
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inferlab.engines.kernels.kv_view import NativeKV
from inferlab.engines.kernels.library import F32, I32, I64, NativeLibrary, P, library

_COMMON = [P, P, P, P, I64, I64, I64, I64, I64, I64, I64, F32, I32]
"""(tables, query starts, positions, out, n_seqs, n_heads, n_kv_heads, d_head, n_blocks,
block_size, max_blocks, scale, threads), after q and the store (and a code store's scales)."""
SIGNATURES = {
    "il_paged_attention_f32": ([P, P, *_COMMON], None),
    "il_paged_attention_i8": ([P, P, P, *_COMMON], None),
    "il_paged_attention_fp8": ([P, P, P, *_COMMON], None),
}

MAX_NATIVE_QUERIES = 16
"""A sequence with more new tokens than this runs torch's SDPA (a prefill: its blocked
matrix products beat one query row at a time)."""
MAX_GROUP, MAX_D_HEAD, MAX_BLOCK_SIZE = 16, 256, 128
"""The kernel's fixed scratch limits: query heads per KV head, head width, block size."""
MAX_QUANT_BLOCK_VALUES = 8192
"""A quantized cache's block (block_size · d_head values) is dequantized on the kernel's stack."""
CODE_KINDS = ("int8", "fp8-e4m3")
"""The quantized stores (`NativeKV.kind`) the kernel reads."""


def functions(lib: NativeLibrary):
    """This family's C functions on `lib`, declared."""
    return lib.functions("paged_attention", SIGNATURES)


def supports(view: NativeKV | None, query_lens: Sequence[int]) -> bool:
    """Whether a step over the cache `view` (`PagedKVCache.native_view()`) with these
    per-sequence query counts runs natively: fp32 storage, or INT8 or FP8 E4M3 codes with their
    per-token scales (read and scaled in the kernel), on the CPU with fp32 compute (bf16 runs
    torch)."""
    if view is None:
        return False
    stored = view.kind == "f32" or (view.kind in CODE_KINDS and
                                    view.block_size * view.d_head <= MAX_QUANT_BLOCK_VALUES)
    return (view.device.type == "cpu" and stored and view.dtype == torch.float32
            and view.block_size <= MAX_BLOCK_SIZE and view.d_head <= MAX_D_HEAD
            and len(query_lens) > 0 and max(query_lens) <= MAX_NATIVE_QUERIES
            and library() is not None)


def plan(path: str, view: NativeKV | None, query_lens: Sequence[int],
         block_tables: torch.Tensor, query_start_loc: torch.Tensor,
         positions: torch.Tensor) -> PagedPlan | None:
    """The step's native plan on kernel path `path` ("native" or "torch"), or None where torch
    runs this step's attention (the torch path, or a step or cache the kernel does not take)."""
    if path != "native" or not supports(view, query_lens):
        return None
    return PagedPlan(view, block_tables, query_start_loc, positions)


class PagedPlan:
    """One step's attention through the block tables of the cache `view`, planned once, called
    per layer."""

    def __init__(self, view: NativeKV, block_tables: torch.Tensor,
                 query_start_loc: torch.Tensor, positions: torch.Tensor) -> None:
        self.view = view
        self.fns = functions(library())
        self.tables = block_tables.to(dtype=torch.int32).contiguous()
        self.qsl = query_start_loc.to(dtype=torch.int32).contiguous()
        self.positions = positions.to(dtype=torch.int64).contiguous()
        self.n_seqs = self.tables.shape[0]
        if self.qsl.numel() != self.n_seqs + 1 or int(self.qsl[-1]) != self.positions.numel():
            raise ValueError(f"query_start_loc {self.qsl.tolist()} does not split "
                             f"{self.positions.numel()} queries over {self.n_seqs} sequences")

    def __call__(self, q: torch.Tensor, layer: int, scale: float | None = None) -> torch.Tensor:
        """q [T, H, D] -> [T, H, D]."""
        view = self.view
        n_tokens, n_heads, d_head = q.shape
        if n_tokens != self.positions.numel():
            raise ValueError(f"{n_tokens} queries for a plan of {self.positions.numel()}")
        if n_heads % view.n_kv_heads or n_heads // view.n_kv_heads > MAX_GROUP:
            raise ValueError(f"{n_heads} query heads over {view.n_kv_heads} KV heads")
        q = q.to(torch.float32).contiguous()
        out = torch.empty_like(q)
        scale = d_head ** -0.5 if scale is None else float(scale)
        kv = view.kv[layer]
        common = (self.tables.data_ptr(), self.qsl.data_ptr(), self.positions.data_ptr(),
                  out.data_ptr(), self.n_seqs, n_heads, view.n_kv_heads, d_head,
                  view.n_blocks, view.block_size, self.tables.shape[1], scale,
                  torch.get_num_threads())
        if kv.dtype == torch.int8:
            self.fns.il_paged_attention_i8(q.data_ptr(), kv.data_ptr(),
                                           view.scales[layer].data_ptr(), *common)
        elif kv.dtype == torch.float8_e4m3fn:
            self.fns.il_paged_attention_fp8(q.data_ptr(), kv.data_ptr(),
                                            view.scales[layer].data_ptr(), *common)
        elif kv.dtype == torch.float32:
            self.fns.il_paged_attention_f32(q.data_ptr(), kv.data_ptr(), *common)
        else:
            raise ValueError(f"no native kernel for a {kv.dtype} cache")
        return out
