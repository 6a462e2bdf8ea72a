"""How much a quantizer lost, per tensor: MSE, SQNR and the worst single error.

    MSE  = 1/N Σ (x - x̂)²
    SQNR = 10 log10( Σ x² / Σ (x - x̂)² )   dB (inf when x̂ = x; 6.02 dB per bit, ideally)
    max abs error = max |x - x̂|

Sums run in fp64: a 28M-element embedding's squared errors lose digits in fp32. Per-layer
figures are these, computed on each layer's weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from inferlab.engines.quant.checks import check_tensor
from inferlab.engines.quant.errors import QuantError


def _pair(x: torch.Tensor, x_hat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = check_tensor(x, "x")
    x_hat = check_tensor(x_hat, "x_hat")
    if x.shape != x_hat.shape:
        raise QuantError(f"x_hat's shape {tuple(x_hat.shape)} differs from x's "
                         f"{tuple(x.shape)}")
    return x.double(), x_hat.double()


def mse(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    x, x_hat = _pair(x, x_hat)
    return float(((x - x_hat) ** 2).mean())


def sqnr_db(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    x, x_hat = _pair(x, x_hat)
    noise = float(((x - x_hat) ** 2).sum())
    signal = float((x**2).sum())
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def max_abs_error(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    x, x_hat = _pair(x, x_hat)
    return float((x - x_hat).abs().max())


@dataclass(frozen=True)
class TensorError:
    """The three error figures of one tensor."""

    mse: float
    sqnr_db: float
    max_abs_error: float

    def to_dict(self) -> dict:
        return {"mse": self.mse, "sqnr_db": self.sqnr_db, "max_abs_error": self.max_abs_error}


def tensor_error(x: torch.Tensor, x_hat: torch.Tensor) -> TensorError:
    return TensorError(mse=mse(x, x_hat), sqnr_db=sqnr_db(x, x_hat),
                       max_abs_error=max_abs_error(x, x_hat))
