"""The tiled loop in C on the native library (`engines.kernels.flash_attention`, built with
the rest of it at first use): what `bench attention` times as the tiled kernel. fp32 on the
CPU; torch's one-shot loop (`tiled.flash_attention`) is the reference and the fallback."""

from __future__ import annotations

import torch

from inferlab.engines.attention.step import as_heads
from inferlab.engines.kernels import flash_attention as kernel
from inferlab.engines.kernels.flash_attention import NATIVE_BC, NATIVE_BR


def native_supported() -> bool:
    """Whether the native library built here holds the tiled kernel."""
    return kernel.available()


def native_flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           causal: bool = False, br: int = NATIVE_BR, bc: int = NATIVE_BC,
                           with_stats: bool = False, lib=None):
    """O [H, N, d] (with_stats: (O, m [H, N], ℓ [H, N])) by the C kernel; q, k, v [N, d] or
    [H, N, d] fp32 on the CPU; `lib`: a build of engines.kernels.library (default: this CPU's).
    RuntimeError where the library is not available."""
    if not kernel.available(lib):
        raise RuntimeError("the native library is not available here (engines.kernels)")
    q, k, v = (as_heads(x, name).contiguous() for x, name in ((q, "q"), (k, "k"), (v, "v")))
    if not (q.shape == k.shape == v.shape) or q.device.type != "cpu":
        raise ValueError(f"q, k, v must be one shape on the CPU, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)} on {q.device}")
    return kernel.flash_attention(q, k, v, causal, br, bc, with_stats, lib)
