"""Paged attention read in place on the native library (`paged_attention.c`): every query
row reads its sequence's K/V through the block table, no gather and no padding, the g query
heads of a GQA group sharing each K/V row, online softmax in fp32.

`PagedPlan` is built once per step from the step's block tables, query start locations and
positions (the tensors the kernel reads, made contiguous int32/int64 once) and called once
per layer with that layer's K/V. It covers decode (one query per sequence), K+1 verification
and short prefill chunks alike: query t of a sequence attends keys 0..positions[t].
"""

from __future__ import annotations

import torch

from inferlab.engines.kernels.library import library

MAX_NATIVE_QUERIES = 16
"""A sequence with more new tokens than this runs torch's SDPA (a prefill: its blocked
matrix products beat one query row at a time)."""
MAX_GROUP, MAX_D_HEAD, MAX_BLOCK_SIZE = 16, 256, 128
"""The kernel's fixed scratch limits: query heads per KV head, head width, block size."""
MAX_QUANT_BLOCK_VALUES = 8192
"""A quantized cache's block (block_size · d_head values) is dequantized on the kernel's stack."""
CODE_KINDS = ("int8", "fp8-e4m3")
"""The quantized caches (engines.kv.QuantizedPagedKVCache's kv_dtype) the kernel reads."""


def _quantized_codes(cache) -> bool:
    return getattr(cache, "kv_dtype", None) in CODE_KINDS and \
        cache.block_size * cache.d_head <= MAX_QUANT_BLOCK_VALUES


def supports(cache, query_lens) -> bool:
    """Whether a step over `cache` (an engines.kv PagedKVCache) with these per-sequence query
    counts runs natively: fp32 storage, or INT8 or FP8 E4M3 codes with their per-token scales
    (read and scaled in the kernel), on the CPU with fp32 compute (bf16 runs torch)."""
    stored = cache.kv.dtype == torch.float32 or _quantized_codes(cache)
    return (cache.device.type == "cpu" and stored and cache.dtype == torch.float32
            and cache.block_size <= MAX_BLOCK_SIZE and cache.d_head <= MAX_D_HEAD
            and len(query_lens) > 0 and max(query_lens) <= MAX_NATIVE_QUERIES
            and library() is not None)


class PagedPlan:
    """One step's attention through `cache`'s block tables, planned once, called per layer."""

    def __init__(self, cache, block_tables: torch.Tensor, query_start_loc: torch.Tensor,
                 positions: torch.Tensor) -> None:
        self.cache = cache
        self.lib = library()
        self.tables = block_tables.to(dtype=torch.int32).contiguous()
        self.qsl = query_start_loc.to(dtype=torch.int32).contiguous()
        self.positions = positions.to(dtype=torch.int64).contiguous()
        self.n_seqs = self.tables.shape[0]
        if self.qsl.numel() != self.n_seqs + 1 or int(self.qsl[-1]) != self.positions.numel():
            raise ValueError(f"query_start_loc {self.qsl.tolist()} does not split "
                             f"{self.positions.numel()} queries over {self.n_seqs} sequences")

    def __call__(self, q: torch.Tensor, layer: int, scale: float | None = None) -> torch.Tensor:
        """q [T, H, D] -> [T, H, D]."""
        cache = self.cache
        n_tokens, n_heads, d_head = q.shape
        if n_tokens != self.positions.numel():
            raise ValueError(f"{n_tokens} queries for a plan of {self.positions.numel()}")
        if n_heads % cache.n_kv_heads or n_heads // cache.n_kv_heads > MAX_GROUP:
            raise ValueError(f"{n_heads} query heads over {cache.n_kv_heads} KV heads")
        q = q.to(torch.float32).contiguous()
        out = torch.empty_like(q)
        scale = d_head ** -0.5 if scale is None else float(scale)
        kv = cache.kv[layer]
        common = (self.tables.data_ptr(), self.qsl.data_ptr(), self.positions.data_ptr(),
                  out.data_ptr(), self.n_seqs, n_heads, cache.n_kv_heads, d_head,
                  cache.n_blocks, cache.block_size, self.tables.shape[1], scale,
                  torch.get_num_threads())
        if kv.dtype == torch.int8:
            self.lib.cdll.il_paged_attention_i8(q.data_ptr(), kv.data_ptr(),
                                                cache.scales[layer].data_ptr(), *common)
        elif kv.dtype == torch.float8_e4m3fn:
            self.lib.cdll.il_paged_attention_fp8(q.data_ptr(), kv.data_ptr(),
                                                 cache.scales[layer].data_ptr(), *common)
        elif kv.dtype == torch.float32:
            self.lib.cdll.il_paged_attention_f32(q.data_ptr(), kv.data_ptr(), *common)
        else:
            raise ValueError(f"no native kernel for a {kv.dtype} cache")
        return out
