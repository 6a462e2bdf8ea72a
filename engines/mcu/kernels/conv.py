"""CONV_2D, int8 activations and per-channel (or per-tensor) int8 filters, as TFLM's
reference ConvPerChannel computes it.

For every output pixel and channel: acc = sum over the window of
filter * (input - input_zero_point), taps outside the image skipped (the same as padding
with input_zero_point), acc += bias, then
out = clamp(MultiplyByQuantizedMultiplier(acc, M[c], shift[c]) + output_zero_point).
Channel c's multiplier is QuantizeMultiplier(input_scale * filter_scale[c] / output_scale)
in double precision. Grouped convolution (input depth a multiple of the filter's) is
supported.

Vectorised per filter tap, a band of output rows at a time (`common.row_bands`, so that
temporaries stay small): the band's input rows are widened to int32 with the offset
applied and zero-padded; each tap is one int32 matmul of a strided window against the
tap's (in, out) filter slice. int32 accumulation is what TFLM does, so sums are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferlab.engines.mcu.kernels.common import (
    OpContext,
    RegionRun,
    Run,
    Window,
    out_size,
    pad_before,
    padded_bands,
    requantize_into,
    row_bands,
    scale_of,
    scales_of,
    whole_tensor_run,
    window,
    zero_point_of,
)
from inferlab.engines.mcu.kernels.fixed_point import activation_range, quantize_multipliers


@dataclass(frozen=True)
class ConvParams:
    """What TFLM's conv Prepare computes, plus the geometry."""

    stride_h: int
    stride_w: int
    dilation_h: int
    dilation_w: int
    pad_h: int
    pad_w: int
    input_offset: int  # -input_zero_point
    output_offset: int  # output_zero_point
    multiplier: np.ndarray  # per output channel, int64
    shift: np.ndarray  # per output channel, int64
    act_min: int
    act_max: int

    def requantize_into(self, acc: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> None:
        """The conv epilogue: acc += bias (if any), then per-channel requantize and clamp
        into `out` (`common.requantize_into`)."""
        if bias is not None:
            acc += bias
        requantize_into(
            acc, self.multiplier, self.shift, self.output_offset, self.act_min, self.act_max, out
        )


def per_channel_multipliers(
    input_scale: float, filter_scales, output_scale: float, channels: int
) -> tuple[np.ndarray, np.ndarray]:
    """TFLM's PopulateConvolutionQuantizationParams: one multiplier per output channel,
    from double(input_scale) * double(filter_scale[c]) / double(output_scale)."""
    scales = list(filter_scales)
    if len(scales) == 1:
        scales = scales * channels
    if len(scales) != channels:
        raise ValueError(f"{len(scales)} filter scales for {channels} output channels")
    return quantize_multipliers([input_scale * s / output_scale for s in scales])


def conv2d_int8(
    x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, out: np.ndarray, p: ConvParams
) -> None:
    """x (N, H, W, Cin) int8, w (Cout, KH, KW, Cin/groups) int8, bias (Cout,) int32 or
    None, out (N, OH, OW, Cout) int8, written in place, a band of output rows at a time."""
    conv2d_region(x, (0, 0), conv_window(x.shape, w.shape, p), w, bias, out, (0, 0), p)


def conv_window(x_shape, w_shape, p: ConvParams) -> Window:
    """The sliding-window geometry of a conv (or depthwise conv) over the whole input."""
    return Window(
        in_h=x_shape[1],
        in_w=x_shape[2],
        kernel_h=w_shape[1],
        kernel_w=w_shape[2],
        stride_h=p.stride_h,
        stride_w=p.stride_w,
        dilation_h=p.dilation_h,
        dilation_w=p.dilation_w,
        pad_h=p.pad_h,
        pad_w=p.pad_w,
    )


def conv2d_region(
    x: np.ndarray,
    x_origin: tuple[int, int],
    geometry: Window,
    w: np.ndarray,
    bias: np.ndarray | None,
    out: np.ndarray,
    out_origin: tuple[int, int],
    p: ConvParams,
) -> None:
    """Output region `out` (N, rows, cols, Cout), whose first row and column are
    `out_origin` in the whole output, from the input region `x` starting at `x_origin` in
    the whole input (it must hold every in-image row and column the region reads). The
    same arithmetic as the whole op, so a region equals that part of the whole output."""
    bands = padded_bands(x, x_origin, geometry, out, out_origin, 0, p.input_offset)
    for y0, y1, x0, x1, xp, band in bands:
        p.requantize_into(_accumulate(xp, w, y1 - y0, x1 - x0, p), bias, band)


def _accumulate(xp: np.ndarray, w: np.ndarray, oh: int, ow: int, p: ConvParams) -> np.ndarray:
    """int32 (N * oh * ow, Cout) sums of filter x (input - zero point) over every tap.

    Per tap, the window is made contiguous once; the filter is widened to int32 a block
    of output channels at a time (never the whole filter)."""
    n, cin = xp.shape[0], xp.shape[3]
    cout, kh, kw, fcin = w.shape
    per_group = cout // (cin // fcin)
    acc = np.zeros((n * oh * ow, cout), dtype=np.int32)
    for ky in range(kh):
        for kx in range(kw):
            tap = window(xp, ky, kx, oh, ow, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w)
            for g0 in range(0, cout, per_group):
                chans = slice(g0 // per_group * fcin, g0 // per_group * fcin + fcin)
                x_g = tap[..., chans].reshape(-1, fcin)
                for c0, c1 in row_bands(per_group, fcin):
                    w_block = w[g0 + c0 : g0 + c1, ky, kx, :].T.astype(np.int32)
                    acc[:, g0 + c0 : g0 + c1] += x_g @ w_block
    return acc


def check_output_size(ctx: OpContext, h, w, kh, kw, sh, sw, dh, dw, oh, ow) -> None:
    """The output tensor's height and width must be what TFLM's ComputeOutSize gives."""
    padding = str(ctx.option("padding", "SAME"))
    want = (out_size(padding, h, kh, sh, dh), out_size(padding, w, kw, sw, dw))
    if want != (oh, ow):
        raise ctx.fail(f"output is {oh}x{ow}, {padding} padding gives {want[0]}x{want[1]}")


def conv_params(ctx: OpContext) -> ConvParams:
    """A CONV_2D's ConvParams, once its input depth splits into groups of the filter's."""
    x, w, y = ctx.tensor_in(0), ctx.tensor_in(1), ctx.tensor_out(0)
    _, h, wd, cin = x.shape
    cout, kh, kw, fcin = w.shape
    _, oh, ow, _ = y.shape
    if fcin == 0 or cin % fcin or cout % (cin // fcin):
        raise ctx.fail(f"input depth {cin} does not split into groups of filter depth {fcin}")
    return prepare_conv_params(ctx, h, wd, kh, kw, oh, ow, cout)


def prepare_conv_params(
    ctx: OpContext, h: int, wd: int, kh: int, kw: int, oh: int, ow: int, cout: int
) -> ConvParams:
    """What TFLM's conv and depthwise Prepare compute alike for an h x wd input, a kh x kw
    filter and an oh x ow x cout output: strides and dilations from the options, the output
    size checked (`check_output_size`), the padding, one multiplier per output channel, the
    zero-point offsets and the activation clamp."""
    x, w, y = ctx.tensor_in(0), ctx.tensor_in(1), ctx.tensor_out(0)
    sh, sw = int(ctx.option("stride_h", 1)), int(ctx.option("stride_w", 1))
    dh = int(ctx.option("dilation_h_factor", 1) or 1)
    dw = int(ctx.option("dilation_w_factor", 1) or 1)
    check_output_size(ctx, h, wd, kh, kw, sh, sw, dh, dw, oh, ow)
    mult, shift = per_channel_multipliers(scale_of(x), scales_of(w), scale_of(y), cout)
    y_zp = zero_point_of(y)
    lo, hi = activation_range(ctx.option("fused_activation_function", "NONE"), scale_of(y), y_zp)
    return ConvParams(
        stride_h=sh,
        stride_w=sw,
        dilation_h=dh,
        dilation_w=dw,
        pad_h=pad_before(sh, dh, h, kh, oh),
        pad_w=pad_before(sw, dw, wd, kw, ow),
        input_offset=-zero_point_of(x),
        output_offset=y_zp,
        multiplier=mult,
        shift=shift,
        act_min=lo,
        act_max=hi,
    )


def prepare_region(ctx: OpContext) -> RegionRun:
    """`run_region(x, x_origin, out, out_origin)`: one output region from an input region."""
    ctx.require_int8_filter_op()
    params = conv_params(ctx)
    w, bias = ctx.array_in(1), ctx.array_in(2)
    geometry = conv_window(ctx.tensor_in(0).shape, ctx.tensor_in(1).shape, params)

    def run_region(x, x_origin, out, out_origin) -> None:
        conv2d_region(x, x_origin, geometry, w, bias, out, out_origin, params)

    return run_region


def prepare(ctx: OpContext) -> Run:
    return whole_tensor_run(ctx, prepare_region(ctx))
