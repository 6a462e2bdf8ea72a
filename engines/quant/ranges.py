"""Calibration ranges: the [α, β] (or max|x|) a quantizer maps onto its integer grid.

- min/max: α = min x, β = max x. Nothing clips; one outlier stretches the step S.
- percentile: α, β = the p_low-th and p_high-th percentiles (linear interpolation between
  order statistics, like `numpy.percentile`'s default). Values outside are clipped by the
  quantizer's clamp: a little clipping error for a finer grid.

With `axis` the range is per channel along that axis (shape (C,)); without, one range for
the whole tensor (a 0-d tensor). All ranges are fp32.
"""

from __future__ import annotations

import torch

from inferlab.engines.quant.checks import check_axis, check_tensor
from inferlab.engines.quant.errors import QuantError

METHODS = ("minmax", "percentile")


def _channels(x: torch.Tensor, axis: int | None) -> torch.Tensor:
    """x as [C, rest] (C = 1 when axis is None)."""
    if axis is None:
        return x.reshape(1, -1)
    axis = check_axis(axis, x.dim())
    return x.movedim(axis, 0).reshape(x.shape[axis], -1)


def _shape(values: torch.Tensor, axis: int | None) -> torch.Tensor:
    return values.reshape(()) if axis is None else values


def _percentile(rows: torch.Tensor, p: float) -> torch.Tensor:
    """Per row, the p-th percentile (0..100), numpy's 'linear' method, in fp64 then fp32."""
    n = rows.shape[1]
    ordered = torch.sort(rows.double(), dim=1).values
    pos = p / 100.0 * (n - 1)
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return (ordered[:, lo] + (ordered[:, hi] - ordered[:, lo]) * frac).float()


def _check_percentile(p: float, name: str) -> float:
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 100.0:
        raise QuantError(f"{name} must be a number in [0, 100], got {p!r}")
    return float(p)


def value_range(x: torch.Tensor, axis: int | None = None, method: str = "minmax",
                percentile: float = 99.99) -> tuple[torch.Tensor, torch.Tensor]:
    """(α, β) of `x`: min/max, or the (100 - percentile, percentile) percentiles."""
    x = check_tensor(x)
    rows = _channels(x, axis)
    if method == "minmax":
        return _shape(rows.amin(dim=1), axis), _shape(rows.amax(dim=1), axis)
    if method == "percentile":
        p = _check_percentile(percentile, "percentile")
        low, high = min(p, 100.0 - p), max(p, 100.0 - p)
        return (_shape(_percentile(rows, low), axis), _shape(_percentile(rows, high), axis))
    raise QuantError(f"method must be one of {', '.join(METHODS)}, got {method!r}")


def abs_max(x: torch.Tensor, axis: int | None = None, method: str = "minmax",
            percentile: float = 99.99) -> torch.Tensor:
    """max|x| (method "minmax") or the `percentile`-th percentile of |x|: a symmetric range."""
    x = check_tensor(x)
    rows = _channels(x, axis).abs()
    if method == "minmax":
        return _shape(rows.amax(dim=1), axis)
    if method == "percentile":
        return _shape(_percentile(rows, _check_percentile(percentile, "percentile")), axis)
    raise QuantError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
