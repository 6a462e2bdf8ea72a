"""QUANTIZE and DEQUANTIZE, as TFLM's reference kernels.

- QUANTIZE float32 -> int8/int16 (AffineQuantize): q = round(float32(x) / float32(scale))
  + zero_point, rounding half away from zero (TfLiteRound on a float), then clamped to the
  type. (Some TFLM sources write this as a +0.5-then-truncate; the tflite-micro wheel we
  test against rounds symmetrically, and the tests pin that.)
- QUANTIZE int8/int16 -> int8/int16 (Requantize): q = clamp(MBQM(x - zp_in, m, s) + zp_out)
  with (m, s) = QuantizeMultiplier(double(scale_in) / double(scale_out)).
- DEQUANTIZE int8/int16 -> float32: float32(double(scale) * (x - zero_point)).
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.mcu.kernels.common import OpContext, Run, row_bands, scale_of, zero_point_of
from inferlab.engines.mcu.kernels.fixed_point import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
)

_INT_TYPES = ("int8", "int16")


def _chunks(x: np.ndarray, out: np.ndarray):
    """Matching flat pieces of x and out, each about BAND_VALUES long."""
    xs, ys = x.reshape(-1), out.reshape(-1)
    for a, b in row_bands(xs.size, 1):
        yield xs[a:b], ys[a:b]


def affine_quantize(x: np.ndarray, out: np.ndarray, scale: float, zero_point: int) -> None:
    """float32 x -> integer out, in place."""
    for xs, ys in _chunks(x, out):
        _affine_quantize(xs, ys, scale, zero_point)


def _affine_quantize(x: np.ndarray, out: np.ndarray, scale: float, zero_point: int) -> None:
    q = np.asarray(x, dtype=np.float32) / np.float32(scale)  # float32 division, as in C
    q = q.astype(np.float64)  # exact; |q| + 0.5 below is exact in float64 too
    q = np.sign(q) * np.floor(np.abs(q) + 0.5)  # std::round: ties away from zero
    info = np.iinfo(out.dtype)
    q = np.clip(q, -(2.0**31), 2.0**31 - 1).astype(np.int64) + zero_point
    out[...] = np.clip(q, info.min, info.max).reshape(out.shape)


def requantize(
    x: np.ndarray, out: np.ndarray, multiplier: int, shift: int, in_zp: int, out_zp: int
) -> None:
    """integer x -> integer out with another scale/zero point, in place."""
    info = np.iinfo(out.dtype)
    for xs, ys in _chunks(x, out):
        v = multiply_by_quantized_multiplier(xs.astype(np.int64) - in_zp, multiplier, shift)
        v += out_zp
        ys[...] = np.clip(v, info.min, info.max)


def dequantize(x: np.ndarray, out: np.ndarray, scale: float, zero_point: int) -> None:
    """integer x -> float32 out, in place."""
    for xs, ys in _chunks(x, out):
        ys[...] = scale * (xs.astype(np.float64) - zero_point)  # one rounding, to float32


def prepare_quantize(ctx: OpContext) -> Run:
    xt, yt = ctx.tensor_in(0), ctx.tensor_out(0)
    ctx.require_dtype(xt, "float32", *_INT_TYPES)
    ctx.require_dtype(yt, *_INT_TYPES)
    if yt.quantization is None or yt.quantization.per_channel:
        raise ctx.fail("the output needs one (per-tensor) scale")
    x, out = ctx.array_in(0), ctx.array_out(0)
    y_scale, y_zp = scale_of(yt), zero_point_of(yt)
    if xt.dtype == "float32":

        def run() -> None:
            affine_quantize(x, out, y_scale, y_zp)

        return run
    multiplier, shift = quantize_multiplier(scale_of(xt) / y_scale)
    x_zp = zero_point_of(xt)

    def run_requantize() -> None:
        requantize(x, out, multiplier, shift, x_zp, y_zp)

    return run_requantize


def prepare_dequantize(ctx: OpContext) -> Run:
    xt, yt = ctx.tensor_in(0), ctx.tensor_out(0)
    ctx.require_dtype(xt, *_INT_TYPES)
    ctx.require_dtype(yt, "float32")
    if xt.quantization is None or xt.quantization.per_channel:
        raise ctx.fail("per-channel DEQUANTIZE is not supported")
    x, out = ctx.array_in(0), ctx.array_out(0)
    scale, zp = scale_of(xt), zero_point_of(xt)

    def run() -> None:
        dequantize(x, out, scale, zp)

    return run
