"""`Linear`: y = x · Wᵀ with the weight stored in whichever layout multiplies fastest here.

Decoding one token is a matrix-VECTOR product per weight, bound by how fast the weight
streams from memory. On x86 CPUs with torch's MKL/oneDNN builds we measured
(SmolLM2 shapes, 1-2 threads):

- fp32: `x @ Wt` with Wt = Wᵀ stored contiguous ([in, out]) runs ~2x faster than
  `F.linear(x, W)` on matrices wider than tall (QKV, gate+up, lm_head), but ~1.6x slower on
  the down projection (out < in), so each matrix gets the better of the two;
- bf16: `F.linear` has no fast matrix-vector path; oneDNN with a pre-packed ("reordered")
  weight is 2-3x faster.

On CUDA (and where oneDNN is absent) it is plain `F.linear`. The layouts are exactly
equivalent; only rounding order differs.

Those are the torch path. The native path (engines/kernels, the default on CPU wherever its
library builds) keeps the weight as it is, [out, in] row-major, and multiplies the fewest
rows (`native_rows(dtype)`: a decode step) with a kernel that streams it once. More rows
(prefill, K+1 verification, a batch of decodes) run oneDNN on a pre-packed copy of the weight,
made at the first such call (so a model that only ever decodes one token never holds two),
or `F.linear` where oneDNN does not run. Measured on SmolLM2's shapes, 2 threads, AMD EPYC
with AVX-512: oneDNN's packed fp32 GEMM runs 2.2-2.7x faster than `F.linear` (MKL) at 256 to
2,048 rows (~430 against ~185 GFLOP/s) and 1.1-1.6x faster than the skinny kernel from 4-5
rows on; the kernel wins at 1-3 rows (1.0-1.4x: no packing overhead per call). On an
AVX2-only EPYC the kernel wins up to 16 rows (`ONEDNN_FROM_ROWS`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from inferlab.engines import kernels
from inferlab.engines.kernels.decoder import NativeOperand
from inferlab.engines.kernels.library import library
from inferlab.engines.kernels.skinny import BoundSkinny, max_rows, skinny_linear

LAYOUTS = ("linear", "transposed", "onednn", "native")


ONEDNN_FROM_ROWS = {"avx512": 4, "avx2": 17, "portable": 4}
"""Per native build (engines.kernels.library's ISA): from this many input rows the native
layout's fp32 products run oneDNN's packed GEMM instead of the skinny kernel (the crossovers
measured above; on the AVX2-only EPYC, weights streamed from memory, the kernel runs 1.1-2.0x
oneDNN at every SmolLM2 shape up to 16 rows on 1 and 2 threads, even with lm_head at 16; the
portable build is not measured and keeps oneDNN from 4)."""


def _onednn_runs(dtype: torch.dtype) -> bool:
    try:
        w = torch.ops.mkldnn._reorder_linear_weight(torch.zeros(8, 8, dtype=dtype))
        torch.ops.mkldnn._linear_pointwise(torch.zeros(1, 8, dtype=dtype), w, None,
                                           "none", [], "")
        return True
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


_ONEDNN_BY_DTYPE: dict[torch.dtype, bool] = {}


def onednn_available(dtype: torch.dtype) -> bool:
    """Whether torch's oneDNN packed linear runs for `dtype` weights here (checked once)."""
    if dtype not in _ONEDNN_BY_DTYPE:
        _ONEDNN_BY_DTYPE[dtype] = _onednn_runs(dtype)
    return _ONEDNN_BY_DTYPE[dtype]


def native_rows(dtype: torch.dtype) -> int:
    """The most input rows the native layout gives the skinny kernel; more go to oneDNN."""
    if dtype == torch.float32 and onednn_available(dtype):
        lib = library()
        return min(ONEDNN_FROM_ROWS.get(lib.isa if lib else "", 4) - 1, max_rows(dtype))
    return max_rows(dtype)


def default_layout(dtype: torch.dtype, device: torch.device, out_features: int = 1,
                   in_features: int = 0) -> str:
    """On CPU: "native" when the kernel path is native and its library runs here; else (the
    torch path) fp32 "transposed" when out_features > in_features (else "linear") and bf16
    "onednn" when oneDNN runs. Elsewhere "linear"."""
    if device.type != "cpu":
        return "linear"
    if dtype in (torch.float32, torch.bfloat16) and kernels.current() == "native" and \
            kernels.native_available():
        return "native"
    if dtype == torch.float32:
        return "transposed" if out_features > in_features else "linear"
    if dtype == torch.bfloat16:
        return "onednn" if onednn_available(dtype) else "linear"
    return "linear"


class Linear:
    """A bias-free linear layer; `weight` is the [out, in] tensor (kept for inspection)."""

    __slots__ = ("weight", "layout", "out_features", "in_features", "_packed", "_bound",
                 "_skinny_rows", "_onednn")

    def __init__(self, weight: torch.Tensor, layout: str | None = None) -> None:
        layout = layout or default_layout(weight.dtype, weight.device, *weight.shape)
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; expected one of {LAYOUTS}")
        self.out_features, self.in_features = weight.shape
        self.layout = layout
        if layout == "transposed":
            self._packed = weight.t().contiguous()
            self.weight = self._packed.t()
        elif layout == "onednn":
            self._packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous())
            self.weight = weight
        else:
            self._packed = weight.contiguous()
            self.weight = self._packed
        lib = library() if layout == "native" else None
        self._bound = BoundSkinny(self._packed, lib) if lib is not None else None
        self._skinny_rows = native_rows(weight.dtype) if layout == "native" else 0
        self._onednn: torch.Tensor | None = None
        """The native layout's oneDNN-packed copy, made at its first call past
        `_skinny_rows` rows."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.layout == "native":
            if x.numel() <= self._skinny_rows * self.in_features:
                y = self._bound(x) if self._bound is not None else \
                    skinny_linear(x, self._packed)
                if y is not None:
                    return y
            return self._many_rows(x)
        if self.layout == "transposed":
            return torch.matmul(x, self._packed)
        if self.layout == "onednn":
            return torch.ops.mkldnn._linear_pointwise(x, self._packed, None, "none", [], "")
        return F.linear(x, self._packed)

    def native_operand(self) -> NativeOperand | None:
        """This layer for the native decoder (`engines.kernels.decoder`): the native layout's
        weight and its skinny rows, or None on another layout."""
        if self.layout != "native" or self._bound is None:
            return None
        kind = {torch.float32: "f32", torch.bfloat16: "bf16"}.get(self._packed.dtype)
        if kind is None:
            return None
        return NativeOperand(kind, self._packed, self.out_features, self.in_features,
                             min(self._skinny_rows, self._bound.max_rows))

    def _many_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The native layout past the skinny kernel's rows: oneDNN's packed GEMM where it
        runs for these operands, else `F.linear`."""
        w = self._packed
        if x.dtype != w.dtype or x.device.type != "cpu" or not onednn_available(w.dtype):
            return F.linear(x, w)
        if self._onednn is None:
            self._onednn = torch.ops.mkldnn._reorder_linear_weight(w)
        return torch.ops.mkldnn._linear_pointwise(x, self._onednn, None, "none", [], "")
