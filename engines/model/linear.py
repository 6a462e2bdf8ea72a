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
library builds) keeps an fp32 weight as panels (`engines.kernels.panel`: k-major tiles of
output rows) that one kernel multiplies for any number of rows, near the FMA units' peak
once a few rows share each weight load and streaming it once per call (`weight` then unpacks
a copy: the model holds the panels only). A bf16 weight stays [out, in] row-major for the
skinny kernel (widened in registers) up to `max_rows`; more rows run oneDNN on a pre-packed
copy made at the first such call (so a model that only decodes never holds two), or
`F.linear` where oneDNN does not run.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from inferlab.engines.kernels import native_available, panel, resolve
from inferlab.engines.kernels.decoder import NativeOperand
from inferlab.engines.kernels.library import library
from inferlab.engines.kernels.skinny import BoundSkinny, max_rows, skinny_linear

LAYOUTS = ("linear", "transposed", "onednn", "native")

PANEL_ROWS = 1 << 30
"""The most input rows an fp32 panel product takes (every count: it beats torch's at each)."""


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


def default_layout(dtype: torch.dtype, device: torch.device, out_features: int = 1,
                   in_features: int = 0, kernels: str | None = None) -> str:
    """On CPU: "native" when the kernel path `kernels` ("native", "torch"; None or "auto": the
    process default) is native and its library runs here; else (the torch path) fp32
    "transposed" when out_features > in_features (else "linear") and bf16 "onednn" when
    oneDNN runs. Elsewhere "linear"."""
    if device.type != "cpu":
        return "linear"
    if dtype in (torch.float32, torch.bfloat16) and resolve(kernels) == "native" and \
            native_available():
        return "native"
    if dtype == torch.float32:
        return "transposed" if out_features > in_features else "linear"
    if dtype == torch.bfloat16:
        return "onednn" if onednn_available(dtype) else "linear"
    return "linear"


class Linear:
    """A bias-free linear layer; `weight` is the [out, in] tensor (for inspection and
    quantization; on the native fp32 layout a copy unpacked from the panels). Its layout is
    `layout`, or the best one for the kernel path `kernels` (`default_layout`)."""

    __slots__ = ("_weight", "layout", "out_features", "in_features", "_packed", "_bound",
                 "_skinny_rows", "_onednn")

    def __init__(self, weight: torch.Tensor, layout: str | None = None,
                 kernels: str | None = None) -> None:
        layout = layout or default_layout(weight.dtype, weight.device, *weight.shape, kernels)
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; expected one of {LAYOUTS}")
        self.out_features, self.in_features = weight.shape
        self.layout = layout
        self._bound: BoundSkinny | panel.BoundPanel | None = None
        self._skinny_rows = 0
        self._onednn: torch.Tensor | None = None
        """A bf16 native layout's oneDNN-packed copy, made at its first call past
        `_skinny_rows` rows."""
        lib = library() if layout == "native" else None
        if layout == "transposed":
            self._packed = weight.t().contiguous()
            self._weight = self._packed.t()
        elif layout == "onednn":
            self._packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous())
            self._weight = weight
        elif layout == "native" and lib is not None and weight.dtype == torch.float32:
            self._packed = panel.pack(weight, lib)
            self._weight = None
            self._bound = panel.BoundPanel(self._packed, self.out_features, lib)
            self._skinny_rows = PANEL_ROWS
        else:
            self._packed = weight.contiguous()
            self._weight = self._packed
            if lib is not None:
                self._bound = BoundSkinny(self._packed, lib)
                self._skinny_rows = max_rows(weight.dtype)

    @property
    def weight(self) -> torch.Tensor:
        if self._weight is None:
            return panel.unpack(self._packed, self.out_features)
        return self._weight

    @property
    def dtype(self) -> torch.dtype:
        """The weight's dtype (without unpacking it)."""
        return self._packed.dtype if self._weight is None else self._weight.dtype

    @property
    def nbytes(self) -> int:
        """Bytes of the [out, in] weight at its dtype (the panels' zero padding not counted)."""
        return self.out_features * self.in_features * self.dtype.itemsize

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.layout == "native":
            if self._weight is None:  # fp32 panels: every row count
                y = self._bound(x)
                return y if x.dtype == torch.float32 else y.to(x.dtype)
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
        weight (or panels) and the most rows it runs natively, or None on another layout."""
        if self.layout != "native" or self._bound is None:
            return None
        if self._weight is None:
            return NativeOperand("f32p", self._packed, self.out_features, self.in_features,
                                 PANEL_ROWS)
        kind = {torch.float32: "f32", torch.bfloat16: "bf16"}.get(self._packed.dtype)
        if kind is None:
            return None
        return NativeOperand(kind, self._packed, self.out_features, self.in_features,
                             min(self._skinny_rows, self._bound.max_rows))

    def _many_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The row-major native layout past the skinny kernel's rows: oneDNN's packed GEMM
        where it runs for these operands, else `F.linear`."""
        w = self._packed
        if x.dtype != w.dtype or x.device.type != "cpu" or not onednn_available(w.dtype):
            return F.linear(x, w)
        if self._onednn is None:
            self._onednn = torch.ops.mkldnn._reorder_linear_weight(w)
        return torch.ops.mkldnn._linear_pointwise(x, self._onednn, None, "none", [], "")


class ConcatLinear:
    """Several linears over the same input, their outputs side by side: y = [l₁(x), l₂(x), …].

    A fused projection (q, k and v; gate and up) whose parts are stored in different encodings
    (a GGUF file may hold q in Q5_0 and v in Q8_0) keeps each part as it is, each read once."""

    __slots__ = ("parts", "out_features", "in_features")

    def __init__(self, parts: list) -> None:
        if not parts or len({p.in_features for p in parts}) != 1:
            raise ValueError("ConcatLinear needs one or more linears of one input width")
        self.parts = list(parts)
        self.in_features = parts[0].in_features
        self.out_features = sum(p.out_features for p in parts)

    @property
    def dtype(self) -> torch.dtype:
        return self.parts[0].dtype

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    @property
    def weight(self) -> torch.Tensor:
        return torch.cat([p.weight for p in self.parts])

    def native_operand(self) -> None:
        return None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([p(x) for p in self.parts], dim=-1)


def linear_kinds(model) -> dict[str, int]:
    """How many of the model's linears (and lm_head) run on each kind: "Q4_K codes", "fp32
    Linear", ..."""
    counts: dict[str, int] = {}

    def kind(linear) -> list[str]:
        parts = getattr(linear, "parts", None)
        if parts is not None:
            return [k for p in parts for k in kind(p)]
        qtype = getattr(linear, "qtype", None)
        return [f"{qtype.name} codes" if qtype is not None else
                f"{str(linear.dtype).removeprefix('torch.')} {type(linear).__name__}"]

    for lw in model.layers:
        for linear in (lw.qkv, lw.o, lw.gate_up, lw.down):
            if linear is not None:
                for k in kind(linear):
                    counts[k] = counts.get(k, 0) + 1
    for k in kind(model.lm_head):
        counts["lm_head: " + k] = 1
    return counts
