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
library builds) keeps the weight as it is, [out, in] row-major, and multiplies up to
`skinny.max_rows(dtype)` rows with a kernel that streams it once; more rows run `F.linear`
on the same tensor (torch's blocked GEMM reuses each weight load better there).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from inferlab.engines import kernels
from inferlab.engines.kernels.library import library
from inferlab.engines.kernels.skinny import BoundSkinny, skinny_linear

LAYOUTS = ("linear", "transposed", "onednn", "native")


def _onednn_available() -> bool:
    try:
        w = torch.ops.mkldnn._reorder_linear_weight(torch.zeros(8, 8, dtype=torch.bfloat16))
        torch.ops.mkldnn._linear_pointwise(torch.zeros(1, 8, dtype=torch.bfloat16), w, None,
                                           "none", [], "")
        return True
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


_ONEDNN: bool | None = None


def default_layout(dtype: torch.dtype, device: torch.device, out_features: int = 1,
                   in_features: int = 0) -> str:
    """On CPU: "native" when the kernel path is native and its library runs here; else (the
    torch path) fp32 "transposed" when out_features > in_features (else "linear") and bf16
    "onednn" when oneDNN runs. Elsewhere "linear"."""
    global _ONEDNN
    if device.type != "cpu":
        return "linear"
    if dtype in (torch.float32, torch.bfloat16) and kernels.current() == "native" and \
            kernels.native_available():
        return "native"
    if dtype == torch.float32:
        return "transposed" if out_features > in_features else "linear"
    if dtype == torch.bfloat16:
        if _ONEDNN is None:
            _ONEDNN = _onednn_available()
        return "onednn" if _ONEDNN else "linear"
    return "linear"


class Linear:
    """A bias-free linear layer; `weight` is the [out, in] tensor (kept for inspection)."""

    __slots__ = ("weight", "layout", "out_features", "in_features", "_packed", "_bound")

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

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.layout == "native":
            y = self._bound(x) if self._bound is not None else skinny_linear(x, self._packed)
            return F.linear(x, self._packed) if y is None else y
        if self.layout == "transposed":
            return torch.matmul(x, self._packed)
        if self.layout == "onednn":
            return torch.ops.mkldnn._linear_pointwise(x, self._packed, None, "none", [], "")
        return F.linear(x, self._packed)
