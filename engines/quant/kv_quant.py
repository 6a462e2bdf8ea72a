"""A model whose paged KV cache stores INT8 or FP8 E4M3 codes (`QuantizedPagedKVCache`).

    kv_quantized(model, "int8" | "fp8-e4m3") -> the same weights (shared, read-only), a
    `new_cache` that makes a quantized cache; attention dequantizes on read.

KV bytes per token: `engines.kv.cache.quantized_kv_bytes_per_slot` (codes plus one fp32
scale per token and head); `engines.roofline.memory.kv_bytes_per_token(cfg, "int8")` counts
the codes alone (the scales add 4 / d_head bytes per element: 6% at d_head 64).
"""

from __future__ import annotations

import copy

from inferlab.engines.kv.cache import KV_QUANT_DTYPES, QuantizedPagedKVCache
from inferlab.engines.quant.errors import QuantError


def kv_quantized(model, kv_dtype: str = "int8"):
    """A shallow copy of `model` (a `Llama`) whose caches are `QuantizedPagedKVCache`s."""
    if kv_dtype not in KV_QUANT_DTYPES:
        raise QuantError(f"kv_dtype must be one of {', '.join(KV_QUANT_DTYPES)}, got "
                         f"{kv_dtype!r}")
    out = copy.copy(model)
    c = model.config

    def new_cache(n_blocks: int, block_size: int = 16) -> QuantizedPagedKVCache:
        return QuantizedPagedKVCache(c.n_layers, n_blocks, block_size, c.n_kv_heads, c.d_head,
                                     model.dtype, model.device, kv_dtype=kv_dtype)

    out.new_cache = new_cache
    out.kv_dtype = kv_dtype
    return out
