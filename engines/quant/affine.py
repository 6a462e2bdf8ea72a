"""Uniform affine (asymmetric) and symmetric integer quantization, per tensor or per channel.

The seed's formulas, for b bits (INT8: b = 8, q_min = -128, q_max = 127):

    S = (β - α) / (2^b - 1)        Z = round(-α / S) + q_min
    q = clamp(round(x / S) + Z, q_min, q_max)        x̂ = S (q - Z)
    symmetric: Z = 0, S = max|x| / (2^(b-1) - 1)

`round(x / S) + Z` is computed exactly the way torch's CPU kernels compute it, so that `q`
equals `torch.quantize_per_tensor(...).int_repr()` / `torch.quantize_per_channel(...)`
bit for bit (measured on torch 2.13, x86):

- both multiply by the fp32 reciprocal 1/S (not divide by S) and add Z BEFORE rounding half
  to even: with Z odd, a tie x/S = k + 0.5 lands on the other integer than
  round(x/S) + Z would give;
- per tensor, x · (1/S) + Z is one fused multiply-add (fbgemm's AVX2 kernel), per channel a
  separate fp32 multiply and add; they differ just below ties, so each is reproduced.

Where torch chooses ranges differently we do not follow it, only its arithmetic: torch's
observers widen [α, β] to include 0 and divide max|x| by 127.5 (not 127) for symmetric
qint8, and torch refuses a zero point outside [q_min, q_max], which the seed's Z reaches when
the range excludes 0. `include_zero=True` gives torch's widening.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inferlab.engines.quant.checks import check_axis, check_bits, check_tensor
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.ranges import abs_max, value_range
from inferlab.engines.quant.rounding import fma_fp32

SMALLEST_SCALE = torch.finfo(torch.float32).tiny
"""2^-126: a smaller S (a tensor of tiny subnormals) would make the fp32 1/S overflow."""


def int_limits(bits: int) -> tuple[int, int]:
    """(q_min, q_max) of a signed b-bit integer: (-2^(b-1), 2^(b-1) - 1)."""
    check_bits(bits, 2, 8)
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


@dataclass(frozen=True)
class AffineQuantized:
    """A tensor quantized to b-bit integers with one (S, Z) per tensor or per channel."""

    q: torch.Tensor
    """int8 codes in [q_min, q_max], the input's shape."""
    scale: torch.Tensor
    """S, fp32: 0-d (per tensor) or (C,) along `axis`."""
    zero_point: torch.Tensor
    """Z, int64, the shape of `scale` (all zero when symmetric)."""
    axis: int | None
    bits: int
    symmetric: bool

    def _broadcast(self, t: torch.Tensor) -> torch.Tensor:
        if self.axis is None:
            return t
        shape = [1] * self.q.dim()
        shape[self.axis] = -1
        return t.reshape(shape)

    def dequantize(self) -> torch.Tensor:
        """x̂ = S (q - Z) in fp32, as torch's `dequantize()` computes it."""
        z = self._broadcast(self.zero_point.to(torch.float32))
        return (self.q.to(torch.float32) - z) * self._broadcast(self.scale)

    @property
    def nbytes(self) -> int:
        """Storage: b bits per code, plus an fp32 S (and an int32 Z unless symmetric) each."""
        params = self.scale.numel() * (4 if self.symmetric else 8)
        return (self.q.numel() * self.bits + 7) // 8 + params


def affine_params(alpha: torch.Tensor, beta: torch.Tensor, bits: int = 8,
                  include_zero: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(S, Z) for the range [α, β]: S = (β - α) / (2^b - 1), Z = round(-α / S) + q_min.

    A range of width 0 (a constant tensor) is widened to include 0 first, and an all-zero
    one gets S = 1: any S reconstructs it, and S must not be 0. S is at least
    `SMALLEST_SCALE`.
    """
    q_min, q_max = int_limits(bits)
    alpha = torch.as_tensor(alpha, dtype=torch.float32)
    beta = torch.as_tensor(beta, dtype=torch.float32)
    if bool((alpha > beta).any()):
        raise QuantError("alpha must not exceed beta")
    if include_zero:
        alpha, beta = torch.clamp(alpha, max=0.0), torch.clamp(beta, min=0.0)
    flat = alpha == beta
    alpha = torch.where(flat, torch.clamp(alpha, max=0.0), alpha)
    beta = torch.where(flat, torch.clamp(beta, min=0.0), beta)
    scale = (beta - alpha) / float(q_max - q_min)
    scale = torch.where(scale == 0, torch.ones_like(scale), scale).clamp(min=SMALLEST_SCALE)
    zero_point = torch.round(-alpha / scale).to(torch.int64) + q_min
    return scale, zero_point


def symmetric_params(amax: torch.Tensor, bits: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """(S, 0) with S = max|x| / (2^(b-1) - 1); S = 1 for an all-zero tensor, and S is at
    least `SMALLEST_SCALE`."""
    _, q_max = int_limits(bits)
    amax = torch.as_tensor(amax, dtype=torch.float32)
    scale = amax / float(q_max)
    scale = torch.where(scale == 0, torch.ones_like(scale), scale).clamp(min=SMALLEST_SCALE)
    return scale, torch.zeros(scale.shape, dtype=torch.int64)


_FMA_CHUNK = 1 << 20  # fma_fp32 holds a few fp64 copies of its input: bound them


def _per_tensor_fma(x: torch.Tensor, inv: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """x · (1/S) + Z rounded once, in chunks of the flattened tensor."""
    flat = x.reshape(-1)
    out = torch.empty_like(flat)
    for start in range(0, flat.numel(), _FMA_CHUNK):
        part = flat[start: start + _FMA_CHUNK]
        out[start: start + _FMA_CHUNK] = fma_fp32(part, inv.expand_as(part), zero.expand_as(part))
    return out.reshape(x.shape)


def quantize_affine(x: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor,
                    bits: int = 8, axis: int | None = None,
                    symmetric: bool = False) -> AffineQuantized:
    """q = clamp(round(x / S) + Z, q_min, q_max) with the given S and Z (see the module
    docstring for how `round(x / S) + Z` is evaluated)."""
    x = check_tensor(x)
    q_min, q_max = int_limits(bits)
    scale = torch.as_tensor(scale, dtype=torch.float32)
    zero_point = torch.as_tensor(zero_point).to(torch.int64)
    if not bool(torch.isfinite(scale).all()) or bool((scale <= 0).any()):
        raise QuantError("scale must be finite and positive")
    if axis is None:
        if scale.numel() != 1 or zero_point.numel() != 1:
            raise QuantError("scale and zero_point must be single values without an axis")
        scale, zero_point = scale.reshape(()), zero_point.reshape(())
        v = _per_tensor_fma(x, 1.0 / scale, zero_point.to(torch.float32))
    else:
        axis = check_axis(axis, x.dim())
        channels = x.shape[axis]
        if scale.shape != (channels,) or zero_point.shape != (channels,):
            raise QuantError(f"scale and zero_point must have shape ({channels},) for axis "
                             f"{axis} of a tensor of shape {tuple(x.shape)}")
        shape = [1] * x.dim()
        shape[axis] = channels
        inv = (1.0 / scale).reshape(shape)
        v = x * inv + zero_point.to(torch.float32).reshape(shape)
    q = torch.round(v).clamp(q_min, q_max).to(torch.int8)
    return AffineQuantized(q=q, scale=scale, zero_point=zero_point, axis=axis, bits=bits,
                           symmetric=symmetric)


def quantize_uniform(x: torch.Tensor, bits: int = 8, axis: int | None = None,
                     symmetric: bool = False, method: str = "minmax",
                     percentile: float = 99.99, include_zero: bool = False) -> AffineQuantized:
    """Calibrate a range on `x` itself (min/max or percentile), then quantize it.

    `axis` None: one (S, Z) for the tensor; an int: one per index along that axis (for a
    weight [out, in], axis 0 is per output channel).
    """
    x = check_tensor(x)
    check_bits(bits, 2, 8)
    if symmetric:
        scale, zero_point = symmetric_params(abs_max(x, axis, method, percentile), bits)
    else:
        alpha, beta = value_range(x, axis, method, percentile)
        scale, zero_point = affine_params(alpha, beta, bits, include_zero)
    return quantize_affine(x, scale, zero_point, bits, axis, symmetric)
