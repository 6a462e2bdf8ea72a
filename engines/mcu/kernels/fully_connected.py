"""FULLY_CONNECTED, int8, as TFLM's reference FullyConnected / FullyConnectedPerChannel.

The input is read as (batches, accum_depth) where accum_depth is the filter's last
dimension and batches is the output's size without its last dimension. For each batch
row b and output unit o: acc = sum_d (filter[o, d] - filter_zero_point) *
(input[b, d] - input_zero_point) + bias[o]; out = clamp(MBQM(acc) + output_zero_point).

The multiplier differs from CONV_2D's for per-tensor filters: TFLM multiplies the two
scales in float32 first (GetQuantizedConvolutionMultipler), then divides by the output
scale in double. Per-channel filters use the conv formula.
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.mcu.kernels.common import (
    OpContext,
    Run,
    requantize_into,
    row_bands,
    scale_of,
    scales_of,
    zero_point_of,
)
from inferlab.engines.mcu.kernels.conv import per_channel_multipliers
from inferlab.engines.mcu.kernels.fixed_point import activation_range, quantize_multiplier


def per_tensor_multiplier(input_scale: float, filter_scale: float, output_scale: float):
    """double(float32(input_scale * filter_scale)) / double(output_scale), quantized."""
    product = float(np.float32(input_scale) * np.float32(filter_scale))
    return quantize_multiplier(product / output_scale)


def fully_connected_int8(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    out: np.ndarray,
    *,
    input_offset: int,
    filter_offset: int,
    output_offset: int,
    multiplier,
    shift,
    act_min: int,
    act_max: int,
) -> None:
    """x (..., accum_depth) int8 read as (batches, accum_depth), w (units, accum_depth)
    int8, out (..., units) int8 written in place."""
    units, depth = w.shape
    rows_in, rows_out = x.reshape(-1, depth), out.reshape(-1, units)
    for r0, r1 in row_bands(rows_in.shape[0], units + depth):
        xi = rows_in[r0:r1].astype(np.int32)
        xi += input_offset
        acc = np.empty((r1 - r0, units), dtype=np.int32)
        for u0, u1 in row_bands(units, depth):  # the filter widened a block at a time
            w_block = w[u0:u1].T.astype(np.int32)
            if filter_offset:
                w_block += filter_offset
            np.matmul(xi, w_block, out=acc[:, u0:u1])
        if bias is not None:
            acc += bias
        requantize_into(acc, multiplier, shift, output_offset, act_min, act_max, rows_out[r0:r1])


def prepare(ctx: OpContext) -> Run:
    ctx.require_int8_filter_op()
    xt, wt, yt = ctx.tensor_in(0), ctx.tensor_in(1), ctx.tensor_out(0)
    if ctx.option("weights_format", "DEFAULT") != "DEFAULT":
        raise ctx.fail(f"weights format {ctx.option('weights_format')} is not supported")
    if len(wt.shape) != 2:
        raise ctx.fail(f"filter shape {list(wt.shape)} is not (units, depth)")
    units, depth = wt.shape
    if xt.elements % depth or yt.shape[-1] != units:
        raise ctx.fail(
            f"input {list(xt.shape)} / output {list(yt.shape)} do not fit filter {list(wt.shape)}"
        )
    if xt.elements // depth != yt.elements // units:
        raise ctx.fail(f"input has {xt.elements // depth} rows, output {yt.elements // units}")
    filter_scales = scales_of(wt)
    if len(filter_scales) > 1:
        mult, shift = per_channel_multipliers(scale_of(xt), filter_scales, scale_of(yt), units)
    else:
        m, s = per_tensor_multiplier(scale_of(xt), filter_scales[0], scale_of(yt))
        mult, shift = np.int64(m), np.int64(s)
    y_zp = zero_point_of(yt)
    lo, hi = activation_range(ctx.option("fused_activation_function", "NONE"), scale_of(yt), y_zp)
    params = dict(
        input_offset=-zero_point_of(xt),
        filter_offset=-zero_point_of(wt),
        output_offset=y_zp,
        multiplier=mult,
        shift=shift,
        act_min=lo,
        act_max=hi,
    )
    x, w, bias, out = ctx.array_in(0), ctx.array_in(1), ctx.array_in(2), ctx.array_out(0)

    def run() -> None:
        fully_connected_int8(x, w, bias, out, **params)

    return run
