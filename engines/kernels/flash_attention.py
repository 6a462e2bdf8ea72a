"""FlashAttention-2's tiled loop in C on the native library (`flash_attention.c`): one
Br × Bc score tile at a time, online softmax in fp32, what `bench attention` times as the
tiled kernel. The attention engines (`engines.attention.native`) shape the inputs; torch's
one-shot loop (`engines.attention.tiled.flash_attention`) is the reference, and runs where
`available()` is False.
"""

from __future__ import annotations

import torch

from inferlab.engines.kernels.library import F32, I32, I64, NativeLibrary, P, library

SIGNATURES = {
    "il_flash_attention_f32": ([P, P, P, P, P, P, I64, I64, I64, I64, I64, I32, F32, I32],
                               None),
}
"""(q, k, v, out, m or NULL, ℓ or NULL, H, N, d, Br, Bc, causal, scale, threads)."""

NATIVE_BR, NATIVE_BC = 128, 256
"""The kernel's default tiles: a 128×256 score tile (128 KiB) stays in a core's L2 while the
kernel passes 64-key slices of the Kᵀ panel and V (16 KiB each at d = 64) through L1. At
N = 4096 and 8192, d = 64, one Sapphire Rapids core (AVX-512 build): 32×128 took 1.17 and 1.30
times 128×256's time, 64×256 1.05 and 1.09, 128×512 0.97 and 0.95."""


def _functions(lib: NativeLibrary | None):
    lib = lib or library()
    if lib is None:
        return None
    try:
        return lib.functions("flash_attention", SIGNATURES)
    except AttributeError:  # a build without the kernel
        return None


def available(lib: NativeLibrary | None = None) -> bool:
    """Whether `lib` (default: this CPU's build) holds the kernel."""
    return _functions(lib) is not None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    br: int = NATIVE_BR, bc: int = NATIVE_BC, with_stats: bool = False,
                    lib: NativeLibrary | None = None):
    """O [H, N, d] (with_stats: (O, m [H, N], ℓ [H, N])) for q, k, v [H, N, d], one shape,
    fp32 contiguous on the CPU; `lib`: a build (default: this CPU's). RuntimeError where the
    library is not available."""
    fns = _functions(lib)
    if fns is None:
        raise RuntimeError("the native library is not available here (engines.kernels)")
    if not (q.shape == k.shape == v.shape) or q.dim() != 3 or q.device.type != "cpu" or \
            any(x.dtype != torch.float32 or not x.is_contiguous() for x in (q, k, v)):
        raise ValueError(f"q, k, v must be one [H, N, d] shape, fp32 and contiguous on the "
                         f"CPU, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)} on "
                         f"{q.device}")
    if br < 1 or bc < 1:
        raise ValueError(f"tile sizes must be at least 1, got Br={br}, Bc={bc}")
    h, n, d = q.shape
    out = torch.empty_like(q)
    m = torch.empty(h, n) if with_stats else None
    ell = torch.empty(h, n) if with_stats else None
    fns.il_flash_attention_f32(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                               m.data_ptr() if with_stats else None,
                               ell.data_ptr() if with_stats else None,
                               h, n, d, br, bc, int(causal), d ** -0.5, torch.get_num_threads())
    return (out, m, ell) if with_stats else out
