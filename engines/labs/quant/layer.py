"""One linear's weight under one data-free scheme, as the lab draws it: the weight histogram,
the quantization grid of one scale unit over it, the error distribution, the scales.

    analyse_layer(weight, "int4-g128", "layers.3.gate_up") -> LayerAnalysis

Every scheme but FP8 has its own grid per scale unit (a row, or a group of a row), so the
grid drawn is a typical unit's — the one with the median step — and the analysis says which
unit it is and how much wider the widest unit's steps are (outliers widen their unit's grid). FP8's grid is the tensor's: its 8-bit values times one scale,
dense near 0 and sparse at the ends. BF16 and the pruned schemes have no grid to draw.
"""

from __future__ import annotations

import torch

from inferlab.engines.labs.quant.records import LayerAnalysis
from inferlab.engines.quant.affine import AffineQuantized, int_limits
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.fp8 import Fp8Quantized, decode_fp8
from inferlab.engines.quant.group import GroupQuantized
from inferlab.engines.quant.metrics import tensor_error
from inferlab.engines.quant.schemes import scheme

BINS = 121
MAX_SCALE_ROWS = 192
"""The scale strip shows at most this many rows (every k-th row of a taller weight)."""


def _histogram(x: torch.Tensor, bins: int = BINS) -> tuple[tuple[float, ...], tuple[int, ...]]:
    lo, hi = float(x.min()), float(x.max())
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    counts = torch.histc(x.float(), bins=bins, min=lo, max=hi)
    edges = torch.linspace(lo, hi, bins + 1)
    return tuple(float(e) for e in edges), tuple(int(c) for c in counts)


def _strip_rows(n_rows: int) -> list[int]:
    step = max(1, -(-n_rows // MAX_SCALE_ROWS))
    return list(range(0, n_rows, step))


def _median_index(steps: torch.Tensor) -> int:
    """The index of the median of `steps` (1-d): the unit drawn."""
    order = steps.argsort()
    return int(order[(steps.numel() - 1) // 2])


def _widest(steps: torch.Tensor, i: int) -> str:
    typical = float(steps[i])
    ratio = float(steps.max()) / typical if typical > 0 else float("inf")
    return f"the median step of {steps.numel():,}; the widest unit's is {ratio:.1f}× coarser"


def _affine_grid(rec: AffineQuantized, rows: list[int]):
    q_min, q_max = int_limits(rec.bits)
    codes = torch.arange(q_min, q_max + 1, dtype=torch.float32)
    scale = rec.scale.reshape(-1).float()
    zero = rec.zero_point.reshape(-1).float()
    if rec.axis is None:
        levels = (codes - zero[0]) * scale[0]
        return levels, "the whole tensor (one scale)", [[float(scale[0])]], [0], "S (one)"
    if rec.axis != 0:
        raise QuantError(f"the lab draws per-output-channel scales (axis 0), got axis "
                         f"{rec.axis}")
    r = _median_index(scale)
    levels = (codes - zero[r]) * scale[r]
    strip = [[float(scale[i])] for i in rows]
    return levels, f"row {r} ({_widest(scale, r)})", strip, rows, "S per output row"


def _group_grid(rec: GroupQuantized, rows: list[int]):
    if rec.symmetric:
        codes = torch.arange(-(1 << (rec.bits - 1)), 1 << (rec.bits - 1), dtype=torch.float32)
    else:
        codes = torch.arange(0, 1 << rec.bits, dtype=torch.float32)
    d = rec.scales.float()
    flat = d.abs().reshape(-1)
    i = _median_index(flat)
    r, g = divmod(i, d.shape[-1])
    levels = codes * d[r, g]
    if rec.mins is not None:
        levels = levels + rec.mins.float()[r, g]
    a = g * rec.group_size
    b = min(a + rec.group_size, rec.q.shape[-1])
    unit = f"row {r}, group {g} (columns {a}-{b - 1}; {_widest(flat, i)})"
    strip = [[float(v) for v in d[i].abs()] for i in rows]
    return levels, unit, strip, rows, f"d per (row, group of {rec.group_size})"


def _fp8_grid(rec: Fp8Quantized):
    values = decode_fp8(torch.arange(256, dtype=torch.uint8), rec.format)
    values = values[torch.isfinite(values)].unique() * rec.scale
    return values, "the whole tensor (one scale)", [[float(rec.scale)]], [0], "S (one)"


def analyse_layer(weight: torch.Tensor, scheme_name: str, linear: str = "") -> LayerAnalysis:
    """`weight` [out, in] quantized with the data-free scheme `scheme_name`, described."""
    if weight.dim() != 2:
        raise QuantError(f"weight must be 2-d [out, in], got shape {tuple(weight.shape)}")
    w = weight.float()
    rec = scheme(scheme_name).quantize(w)
    w_hat = rec.dequantize()
    rows = _strip_rows(w.shape[0])
    levels, unit, strip, strip_rows, label = torch.empty(0), "", [], [], ""
    if isinstance(rec, AffineQuantized):
        levels, unit, strip, strip_rows, label = _affine_grid(rec, rows)
    elif isinstance(rec, GroupQuantized):
        levels, unit, strip, strip_rows, label = _group_grid(rec, rows)
    elif isinstance(rec, Fp8Quantized):
        levels, unit, strip, strip_rows, label = _fp8_grid(rec)
    edges, counts = _histogram(w)
    err_edges, err_counts = _histogram(w_hat - w)
    levels = levels.sort().values
    clip = None if levels.numel() == 0 else (float(levels[0]), float(levels[-1]))
    return LayerAnalysis(
        scheme_name, linear, (int(w.shape[0]), int(w.shape[1])), edges, counts,
        tuple(float(v) for v in levels), unit, clip, err_edges, err_counts,
        tuple(tuple(r) for r in strip), tuple(strip_rows), label, tensor_error(w, w_hat),
        int(rec.nbytes), int(weight.numel() * weight.element_size()))
