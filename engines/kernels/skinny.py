"""Skinny matrix products on the native library: y = x · Wᵀ for up to `MAX_SKINNY_ROWS` rows
of x, the weight W [out, in] read once per call in the layout the model stores it (fp32, or
bf16 widened to fp32 in registers; fp32 accumulation). `skinny.c` holds the kernel.

`skinny_linear(x, w)` returns None where it does not apply (another device or dtype, more
rows than `max_rows(dtype)`, no library): the caller then runs torch.
"""

from __future__ import annotations

import torch

from inferlab.engines.kernels.library import I32, I64, NativeLibrary, P, host_flags, library

SIGNATURES = {name: ([P, P, P, I64, I64, I64, I32], None)
              for name in ("il_skinny_f32", "il_skinny_bf16")}
"""(x, w, y, m, k, n, threads): y [m, n] = x [m, k] · w [n, k]ᵀ."""


def functions(lib: NativeLibrary):
    """This family's C functions on `lib`, declared."""
    return lib.functions("skinny", SIGNATURES)

MAX_SKINNY_ROWS = 32
"""Up to this many fp32 rows the native kernel streams the weight once and beats torch's
matmul (SmolLM2's shapes, 1-2 threads, AVX-512 Xeon: 5 rows cost 1.08-1.17x one row against
torch's 1.6-2.3x; 16 rows 1.6-1.9x against 2.1-3.1x; at 32 rows, a batch-32 decode, 0.85-1.0x
torch's time on 2 threads, 960x576 1.04x); past it torch's blocked GEMM reuses each weight
load better than a 4-row register tile does (48 rows: 0.9-1.13x)."""

MAX_BF16_ROWS_FAST_TORCH = 2
"""bf16 weights widen to fp32 in registers, so the kernel turns compute-bound sooner: where
torch has a native bf16 GEMM (AVX-512 BF16 or AMX: oneDNN) it wins from 3-5 rows on, and
the kernel only takes 1-2 (measured 1.3-2x faster than torch there). Elsewhere torch's bf16
matmul is slow and the kernel takes up to MAX_SKINNY_ROWS."""


def max_rows(dtype: torch.dtype) -> int:
    """The most input rows the native kernel takes for weights of `dtype` on this CPU."""
    if dtype == torch.bfloat16:
        global _FAST_BF16
        if _FAST_BF16 is None:
            _FAST_BF16 = bool({"avx512_bf16", "amx_bf16"} & host_flags())
        return MAX_BF16_ROWS_FAST_TORCH if _FAST_BF16 else MAX_SKINNY_ROWS
    return MAX_SKINNY_ROWS


_FAST_BF16: bool | None = None

_KERNELS = {torch.float32: "il_skinny_f32", torch.bfloat16: "il_skinny_bf16"}


def supports(weight: torch.Tensor) -> bool:
    """Whether `weight` ([out, in], contiguous) can run on the native kernel here."""
    return (weight.device.type == "cpu" and weight.dtype in _KERNELS and weight.dim() == 2
            and weight.is_contiguous() and library() is not None)


def skinny_linear(x: torch.Tensor, weight: torch.Tensor,
                  lib: NativeLibrary | None = None) -> torch.Tensor | None:
    """x [..., in] · weightᵀ -> [..., out] in x's dtype, or None (torch should run it).
    `lib` picks a build (tests compare every instruction set); default `library()`."""
    lib = lib or library()
    if lib is None or x.device.type != "cpu" or weight.dtype not in _KERNELS or \
            not weight.is_contiguous():
        return None
    k = weight.shape[1]
    x2 = x.reshape(-1, k)
    m = x2.shape[0]
    if not 0 < m <= max_rows(weight.dtype):
        return None
    if x2.dtype != torch.float32 or not x2.is_contiguous():
        x2 = x2.to(torch.float32).contiguous()
    n = weight.shape[0]
    y = torch.empty(m, n, dtype=torch.float32)
    fn = getattr(functions(lib), _KERNELS[weight.dtype])
    fn(x2.data_ptr(), weight.data_ptr(), y.data_ptr(), m, k, n, torch.get_num_threads())
    y = y.view(*x.shape[:-1], n)
    return y if x.dtype == torch.float32 else y.to(x.dtype)


class BoundSkinny:
    """A weight bound to the native kernel once, so that a call is one ctypes call (the
    general `skinny_linear` checks and looks up per call: ~7 µs against ~2.5 µs, measured;
    121 calls a SmolLM2 token). Inputs off the fast path (another dtype, shape or device)
    go through `skinny_linear`; None where it does not apply either."""

    __slots__ = ("weight", "lib", "fn", "out_features", "in_features", "max_rows")

    def __init__(self, weight: torch.Tensor, lib: NativeLibrary) -> None:
        self.weight = weight  # its pointer is taken per call: a copy never reads a stale one
        self.lib = lib
        self.fn = getattr(functions(lib), _KERNELS[weight.dtype])
        self.out_features, self.in_features = weight.shape
        self.max_rows = max_rows(weight.dtype)

    def __call__(self, x: torch.Tensor) -> torch.Tensor | None:
        if x.dtype is torch.float32 and x.dim() == 2 and x.device.type == "cpu" and \
                x.is_contiguous() and x.shape[1] == self.in_features and \
                0 < x.shape[0] <= self.max_rows:
            m = x.shape[0]
            y = torch.empty(m, self.out_features)
            self.fn(x.data_ptr(), self.weight.data_ptr(), y.data_ptr(), m, self.in_features,
                    self.out_features, torch.get_num_threads())
            return y
        return skinny_linear(x, self.weight, self.lib)  # the same build, off the fast path
