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

from engines.mcu.kernels.common import (
    OpContext,
    RegionRun,
    Run,
    Window,
    pad_before,
    padded,
    region_bands,
    requantize_into,
    scale_of,
    scales_of,
    whole_tensor_run,
    window,
    zero_point_of,
)
from engines.mcu.kernels.conv import (
    ConvParams,
    check_output_size,
    conv_window,
    per_channel_multipliers,
)
from engines.mcu.kernels.fixed_point import activation_range


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
    for y0, y1, x0, x1, band in region_bands(out, out_origin):
        rows, pad_top, pad_left, need_h, need_w = geometry.gather(x, x_origin, y0, y1, x0, x1)
        xi = rows.astype(np.int32)
        xi += p.input_offset
        xp = padded(xi, pad_top, pad_left, need_h, need_w, 0)
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
        if bias is not None:
            acc += bias
        requantize_into(acc, p.multiplier, p.shift, p.output_offset, p.act_min, p.act_max, band)


def prepare_region(ctx: OpContext) -> RegionRun:
    """`run_region(x, x_origin, out, out_origin)`: one output region from an input region."""
    xt, wt, yt = ctx.tensor_in(0), ctx.tensor_in(1), ctx.tensor_out(0)
    ctx.require_dtype(xt, "int8")
    ctx.require_dtype(wt, "int8")
    ctx.require_dtype(yt, "int8")
    if ctx.tensor_in(2) is not None:
        ctx.require_dtype(ctx.tensor_in(2), "int32")
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
    sh, sw = int(ctx.option("stride_h", 1)), int(ctx.option("stride_w", 1))
    dh = int(ctx.option("dilation_h_factor", 1) or 1)
    dw = int(ctx.option("dilation_w_factor", 1) or 1)
    check_output_size(ctx, h, wd, kh, kw, sh, sw, dh, dw, oh, ow)
    mult, shift = per_channel_multipliers(scale_of(xt), scales_of(wt), scale_of(yt), cout)
    y_zp = zero_point_of(yt)
    lo, hi = activation_range(ctx.option("fused_activation_function", "NONE"), scale_of(yt), y_zp)
    params = ConvParams(
        stride_h=sh,
        stride_w=sw,
        dilation_h=dh,
        dilation_w=dw,
        pad_h=pad_before(sh, dh, h, kh, oh),
        pad_w=pad_before(sw, dw, wd, kw, ow),
        input_offset=-zero_point_of(xt),
        output_offset=y_zp,
        multiplier=mult,
        shift=shift,
        act_min=lo,
        act_max=hi,
    )
    w, bias = ctx.array_in(1), ctx.array_in(2)
    geometry = conv_window(xt.shape, wt.shape, params)

    def run_region(x, x_origin, out, out_origin) -> None:
        depthwise_region(x, x_origin, geometry, w, bias, out, out_origin, params, multiplier)

    return run_region


def prepare(ctx: OpContext) -> Run:
    return whole_tensor_run(ctx, prepare_region(ctx))
