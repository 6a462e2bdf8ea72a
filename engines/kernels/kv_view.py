"""`NativeKV`: a paged KV cache as the native kernels read it. The cache hands it out
(`engines.kv.PagedKVCache.native_view`), so the paged-attention, K/V-write and decoder kernels
never ask which class of cache they were given."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

KV_KINDS = ("f32", "int8", "fp8-e4m3")
"""What the native kernels read: fp32 values, or INT8 or FP8 E4M3 codes with an fp32 scale
per token and head."""


@dataclass(frozen=True)
class NativeKV:
    """The whole store `kv` [n_layers, 2 (K, V), n_kv_heads, n_blocks, block_size, d_head]
    (fp32 values, or codes of `kind`), a quantized store's `scales` [n_layers, 2, n_kv_heads,
    n_blocks, block_size] fp32 (None for fp32), the compute `dtype` attention hands out and
    the device."""

    kind: str
    kv: torch.Tensor = field(repr=False)
    scales: torch.Tensor | None = field(repr=False)
    dtype: torch.dtype
    device: torch.device

    def __post_init__(self) -> None:
        if self.kind not in KV_KINDS:
            raise ValueError(f"kind must be one of {', '.join(KV_KINDS)}, got {self.kind!r}")

    @property
    def n_kv_heads(self) -> int:
        return self.kv.shape[2]

    @property
    def n_blocks(self) -> int:
        return self.kv.shape[3]

    @property
    def block_size(self) -> int:
        return self.kv.shape[4]

    @property
    def d_head(self) -> int:
        return self.kv.shape[5]

    @property
    def n_slots(self) -> int:
        return self.n_blocks * self.block_size

    def slot_stores(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer `layer`'s K and V values or codes as [n_kv_heads, n_slots, d_head] views."""
        kv = self.kv[layer].view(2, self.n_kv_heads, self.n_slots, self.d_head)
        return kv[0], kv[1]

    def scale_stores(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A quantized store's K and V scales of layer `layer` as [n_kv_heads, n_slots] views."""
        if self.scales is None:
            raise ValueError("an fp32 store keeps no scales")
        s = self.scales[layer].view(2, self.n_kv_heads, self.n_slots)
        return s[0], s[1]
