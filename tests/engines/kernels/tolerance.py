"""How close a kernel's float32 matrix product must be to float64."""

from __future__ import annotations

import torch


def dot_err(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> float:
    """The worst error of y = x wᵀ against float64, relative to Σ|x_i w_i| of each output.

    That sum is the scale float32 rounding in a dot product works at, and cancellation cannot
    shrink it: a plain relative error, divided by a single output near zero, made hypothesis'
    1×1 cases flaky. A wrong layout, scale or tail errs by O(1) on this measure."""
    x, w = x.double().reshape(-1, x.shape[-1]), w.double()
    ref = x @ w.t()
    scale = x.abs() @ w.abs().t()
    err = (y.double().reshape(ref.shape) - ref).abs()
    return float((err / scale.clamp_min(1e-30)).max())
