"""SOFTMAX, int8 input, int8 or int16 output, as TFLM's reference quantized Softmax.

Over the last axis, per row: diff = x - max(row). Prepare turns beta * input_scale into a
Q5.26 multiplier (PreprocessSoftmaxScaling with 5 integer bits) and a cut-off diff_min
(CalculateInputRadius); entries with diff < diff_min contribute nothing and output the
type's minimum. For the others: e = exp_on_negative_values(MBQM>1(diff)) in Q0.31,
sum = sum of e rescaled to Q12.19, r = GetReciprocal(sum) with num_bits_over_unit,
out = RoundingDivideByPOT(r * e, num_bits_over_unit + 31 - output_bits) + output_min,
clamped. The output quantization TFLM requires: int8 scale 1/256 and zero point -128;
int16 scale 1/65536 and zero point -32768.
"""

from __future__ import annotations

import math

import numpy as np

from inferlab.engines.mcu.kernels.common import OpContext, Run, row_bands, scale_of, zero_point_of
from inferlab.engines.mcu.kernels.fixed_point import (
    exp_on_negative_values,
    get_reciprocal,
    multiply_by_quantized_multiplier_greater_than_one,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)

SCALED_DIFF_INTEGER_BITS = 5
ACCUMULATION_INTEGER_BITS = 12


def softmax_params(beta: float, input_scale: float) -> tuple[int, int, int]:
    """(input_multiplier, input_left_shift, diff_min) as TFLM's softmax Prepare makes them."""
    max_real = float((1 << 31) - 1)
    real = min(beta * input_scale * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), max_real)
    if not real > 1.0:
        raise ValueError(f"beta * input_scale = {beta * input_scale} is too small for TFLM")
    multiplier, left_shift = quantize_multiplier(real)
    radius = math.floor(
        ((1 << SCALED_DIFF_INTEGER_BITS) - 1)
        * (1 << (31 - SCALED_DIFF_INTEGER_BITS))
        / (1 << left_shift)
    )
    return multiplier, left_shift, -radius


def softmax_int8(
    x: np.ndarray, out: np.ndarray, multiplier: int, left_shift: int, diff_min: int
) -> None:
    """x int8 -> out int8 or int16 (same shape), softmax over the last axis, in place."""
    depth = x.shape[-1]
    rows_in, rows_out = x.reshape(-1, depth), out.reshape(-1, depth)
    for r0, r1 in row_bands(rows_in.shape[0], depth):
        _softmax_rows(rows_in[r0:r1], rows_out[r0:r1], multiplier, left_shift, diff_min)


def _softmax_rows(
    x: np.ndarray, out: np.ndarray, multiplier: int, left_shift: int, diff_min: int
) -> None:
    xi = x.astype(np.int64)
    diff = xi - xi.max(axis=1, keepdims=True)
    used = diff >= diff_min
    scaled = multiply_by_quantized_multiplier_greater_than_one(diff, multiplier, left_shift)
    exps = exp_on_negative_values(scaled, SCALED_DIFF_INTEGER_BITS)
    rescaled = rounding_divide_by_pot(exps, ACCUMULATION_INTEGER_BITS)
    sum_of_exps = wrap_int32(np.where(used, rescaled, 0).sum(axis=1, keepdims=True))
    reciprocal, bits_over_unit = get_reciprocal(sum_of_exps, ACCUMULATION_INTEGER_BITS)
    info = np.iinfo(out.dtype)
    exponent = bits_over_unit + 31 - 8 * out.dtype.itemsize
    unsat = rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(reciprocal, exps), exponent
    )
    y = np.clip(unsat + info.min, info.min, info.max)
    y = np.where(used, y, info.min)
    out[...] = y.reshape(out.shape)


def prepare(ctx: OpContext) -> Run:
    xt, yt = ctx.tensor_in(0), ctx.tensor_out(0)
    ctx.require_dtype(xt, "int8")
    ctx.require_dtype(yt, "int8", "int16")
    want = (1.0 / 256, -128) if yt.dtype == "int8" else (1.0 / 65536, -32768)
    got = (scale_of(yt), zero_point_of(yt))
    if yt.dtype == "int8" and got != want:
        raise ctx.fail(f"int8 output quantization {got}, TFLM requires scale 1/256, zp -128")
    if yt.dtype == "int16" and (got[1] != want[1] or abs(got[0] - want[0]) > 0.001 * want[0]):
        raise ctx.fail(f"int16 output quantization {got}, TFLM requires 1/65536, zp -32768")
    beta = float(ctx.option("beta", 1.0))
    try:
        multiplier, left_shift, diff_min = softmax_params(beta, scale_of(xt))
    except ValueError as exc:
        raise ctx.fail(str(exc)) from None
    x, out = ctx.array_in(0), ctx.array_out(0)

    def run() -> None:
        softmax_int8(x, out, multiplier, left_shift, diff_min)

    return run
