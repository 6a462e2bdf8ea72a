"""The tiled loop in C on the native library (`engines/kernels/flash_attention.c`, built with
the rest of it at first use): what `bench attention` times as the tiled kernel. fp32 on the
CPU; torch's one-shot loop (`tiled.flash_attention`) is the reference and the fallback."""

from __future__ import annotations

import ctypes

import torch

from inferlab.engines.attention.step import as_heads
from inferlab.engines.kernels.library import library

NATIVE_BR, NATIVE_BC = 128, 256
"""The kernel's default tiles: a 128×256 score tile (128 KiB) stays in a core's L2 while the
kernel passes 64-key slices of the Kᵀ panel and V (16 KiB each at d = 64) through L1. At
N = 4096 and 8192, d = 64, one Sapphire Rapids core (AVX-512 build): 32×128 took 1.17 and 1.30
times 128×256's time, 64×256 1.05 and 1.09, 128×512 0.97 and 0.95."""


def _function(lib=None):
    lib = lib or library()
    if lib is None:
        return None
    fn = getattr(lib.cdll, "il_flash_attention_f32", None)
    if fn is not None and fn.argtypes is None:
        p, i64 = ctypes.c_void_p, ctypes.c_int64
        fn.argtypes = [p, p, p, p, p, p, i64, i64, i64, i64, i64, ctypes.c_int, ctypes.c_float,
                       ctypes.c_int]
        fn.restype = None
    return fn


def native_supported() -> bool:
    """Whether the native library built here holds the tiled kernel."""
    return _function() is not None


def native_flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           causal: bool = False, br: int = NATIVE_BR, bc: int = NATIVE_BC,
                           with_stats: bool = False, lib=None):
    """O [H, N, d] (with_stats: (O, m [H, N], ℓ [H, N])) by the C kernel; q, k, v [N, d] or
    [H, N, d] fp32 on the CPU; `lib`: a build of engines.kernels.library (default: this CPU's).
    RuntimeError where the library is not available."""
    fn = _function(lib)
    if fn is None:
        raise RuntimeError("the native library is not available here (engines.kernels)")
    q, k, v = (as_heads(x, name).contiguous() for x, name in ((q, "q"), (k, "k"), (v, "v")))
    if not (q.shape == k.shape == v.shape) or q.device.type != "cpu":
        raise ValueError(f"q, k, v must be one shape on the CPU, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)} on {q.device}")
    if br < 1 or bc < 1:
        raise ValueError(f"tile sizes must be at least 1, got Br={br}, Bc={bc}")
    h, n, d = q.shape
    out = torch.empty_like(q)
    m = torch.empty(h, n) if with_stats else None
    ell = torch.empty(h, n) if with_stats else None
    fn(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
       m.data_ptr() if with_stats else None, ell.data_ptr() if with_stats else None,
       h, n, d, br, bc, int(causal), d ** -0.5, torch.get_num_threads())
    return (out, m, ell) if with_stats else out
