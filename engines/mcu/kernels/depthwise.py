"""DEPTHWISE_CONV_2D, int8, as TFLM's reference DepthwiseConvPerChannel computes it.

Output channel oc = ic * depth_multiplier + m sees only input channel ic:
acc = sum over the window of filter[0, ky, kx, oc] * (input[.., ic] - input_zero_point),
taps outside the image skipped; then bias, the per-channel multiplier and the clamp
exactly as in CONV_2D (the multipliers come from the same TFLM function).

Vectorised per filter tap, a band of output rows at a time: int32 multiply-accumulate of
a strided window of the padded, offset input (channels repeated depth_multiplier times)
with the tap's filter row.
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.mcu.kernels.common import (
    OpContext,
    RegionRun,
    Run,
    Window,
    padded_bands,
    whole_tensor_run,
    window,
)
from inferlab.engines.mcu.kernels.conv import ConvParams, conv_window, prepare_conv_params


def depthwise_conv2d_int8(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    out: np.ndarray,
    p: ConvParams,
    depth_multiplier: int,
) -> None:
    """x (N, H, W, Cin) int8, w (1, KH, KW, Cin * depth_multiplier) int8, bias (Cout,)
    int32 or None, out (N, OH, OW, Cout) int8, written in place."""
    geometry = conv_window(x.shape, w.shape, p)
    depthwise_region(x, (0, 0), geometry, w, bias, out, (0, 0), p, depth_multiplier)


def depthwise_region(
    x: np.ndarray,
    x_origin: tuple[int, int],
    geometry: Window,
    w: np.ndarray,
    bias: np.ndarray | None,
    out: np.ndarray,
    out_origin: tuple[int, int],
    p: ConvParams,
    depth_multiplier: int,
) -> None:
    """Output region `out` from input region `x` (see `conv.conv2d_region`); w is the
    (1, KH, KW, Cout) int8 filter."""
    _, kh, kw, _ = w.shape
    wi = w[0].astype(np.int32)
    bands = padded_bands(x, x_origin, geometry, out, out_origin, 0, p.input_offset)
    for y0, y1, x0, x1, xp, band in bands:
        if depth_multiplier > 1:
            xp = np.repeat(xp, depth_multiplier, axis=3)
        acc = np.zeros(band.shape, dtype=np.int32)
        prod = np.empty(band.shape, dtype=np.int32)
        for ky in range(kh):
            for kx in range(kw):
                tap = window(
                    xp, ky, kx, y1 - y0, x1 - x0, p.stride_h, p.stride_w, p.dilation_h,
                    p.dilation_w,
                )  # fmt: skip
                np.multiply(tap, wi[ky, kx], out=prod)
                acc += prod
        p.requantize_into(acc, bias, band)


def depthwise_params(ctx: OpContext) -> tuple[ConvParams, int]:
    """A DEPTHWISE_CONV_2D's ConvParams and depth multiplier, once the filter's depth is
    the input's times the multiplier and the output's depth is the filter's."""
    xt, wt, yt = ctx.tensor_in(0), ctx.tensor_in(1), ctx.tensor_out(0)
    _, h, wd, cin = xt.shape
    _, kh, kw, cout = wt.shape
    _, oh, ow, ycout = yt.shape
    multiplier = int(ctx.option("depth_multiplier", 1) or 1)
    if cin * multiplier != cout:
        raise ctx.fail(
            f"filter depth {cout} is not input depth {cin} x depth_multiplier {multiplier}"
        )
    if ycout != cout:
        raise ctx.fail(f"output depth {ycout} differs from filter depth {cout}")
    return prepare_conv_params(ctx, h, wd, kh, kw, oh, ow, cout), multiplier


def prepare_region(ctx: OpContext) -> RegionRun:
    """`run_region(x, x_origin, out, out_origin)`: one output region from an input region."""
    ctx.require_int8_filter_op()
    params, multiplier = depthwise_params(ctx)
    w, bias = ctx.array_in(1), ctx.array_in(2)
    geometry = conv_window(ctx.tensor_in(0).shape, ctx.tensor_in(1).shape, params)

    def run_region(x, x_origin, out, out_origin) -> None:
        depthwise_region(x, x_origin, geometry, w, bias, out, out_origin, params, multiplier)

    return run_region


def prepare(ctx: OpContext) -> Run:
    return whole_tensor_run(ctx, prepare_region(ctx))
