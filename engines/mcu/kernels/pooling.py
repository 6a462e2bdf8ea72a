"""AVERAGE_POOL_2D and MAX_POOL_2D, int8, as TFLM's reference integer pooling kernels.

Both work on the raw int8 values (input and output share one quantization, as TFLM's
Prepare requires). A window clipped by SAME padding only counts the taps inside the
image. Average: acc = sum of the taps, n = their count, then
out = (acc + n/2) / n if acc > 0 else (acc - n/2) / n, with C's truncating division
(round half away from zero), then the activation clamp. Max: the largest tap, clamped.
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.mcu.kernels.common import (
    OpContext,
    RegionRun,
    Run,
    Window,
    out_size,
    pad_before,
    padded_bands,
    scale_of,
    whole_tensor_run,
    window,
    zero_point_of,
)
from inferlab.engines.mcu.kernels.fixed_point import activation_range


def window_counts(h: int, w: int, oh: int, ow: int, fh: int, fw: int, sh: int, sw: int):
    """(oh, ow) int32: how many taps of each output's window lie inside the image."""
    pad_h, pad_w = pad_before(sh, 1, h, fh, oh), pad_before(sw, 1, w, fw, ow)
    ys = np.arange(oh) * sh - pad_h
    xs = np.arange(ow) * sw - pad_w
    rows = np.minimum(fh, h - ys) - np.maximum(0, -ys)
    cols = np.minimum(fw, w - xs) - np.maximum(0, -xs)
    return (rows[:, None] * cols[None, :]).astype(np.int32)


def pool_window(h: int, w: int, oh: int, ow: int, fh: int, fw: int, sh: int, sw: int) -> Window:
    """The sliding-window geometry of a pooling op over the whole (h, w) input."""
    return Window(
        in_h=h,
        in_w=w,
        kernel_h=fh,
        kernel_w=fw,
        stride_h=sh,
        stride_w=sw,
        pad_h=pad_before(sh, 1, h, fh, oh),
        pad_w=pad_before(sw, 1, w, fw, ow),
    )


def average_pool_int8(
    x: np.ndarray,
    out: np.ndarray,
    fh: int,
    fw: int,
    sh: int,
    sw: int,
    act_min: int,
    act_max: int,
    counts: np.ndarray | None = None,
) -> None:
    """x (N, H, W, C) int8 -> out (N, OH, OW, C) int8, in place."""
    _, h, w, _ = x.shape
    _, oh, ow, _ = out.shape
    if counts is None:
        counts = window_counts(h, w, oh, ow, fh, fw, sh, sw)
    if np.any(counts <= 0):
        raise ValueError("a pooling window lies wholly outside the input")
    geometry = pool_window(h, w, oh, ow, fh, fw, sh, sw)
    average_pool_region(x, (0, 0), geometry, out, (0, 0), act_min, act_max, counts)


def average_pool_region(
    x: np.ndarray,
    x_origin: tuple[int, int],
    geometry: Window,
    out: np.ndarray,
    out_origin: tuple[int, int],
    act_min: int,
    act_max: int,
    counts: np.ndarray,
) -> None:
    """Output region `out` from input region `x` (see `conv.conv2d_region`); `counts` is
    the whole output's (OH, OW) in-image tap counts."""
    sh, sw = geometry.stride_h, geometry.stride_w
    for y0, y1, x0, x1, xp, band in padded_bands(x, x_origin, geometry, out, out_origin, 0):
        acc = np.zeros(band.shape, dtype=np.int32)
        for ky in range(geometry.kernel_h):
            for kx in range(geometry.kernel_w):
                acc += window(xp, ky, kx, y1 - y0, x1 - x0, sh, sw)
        n = counts[None, y0:y1, x0:x1, None]
        half = n // 2
        num = np.where(acc > 0, acc + half, acc - half)
        q = np.abs(num) // n
        q = np.where(num < 0, -q, q)  # C division truncates toward zero
        np.clip(q, act_min, act_max, out=q)
        band[...] = q


def max_pool_int8(
    x: np.ndarray,
    out: np.ndarray,
    fh: int,
    fw: int,
    sh: int,
    sw: int,
    act_min: int,
    act_max: int,
) -> None:
    """x (N, H, W, C) int8 -> out (N, OH, OW, C) int8, in place."""
    _, h, w, _ = x.shape
    _, oh, ow, _ = out.shape
    geometry = pool_window(h, w, oh, ow, fh, fw, sh, sw)
    max_pool_region(x, (0, 0), geometry, out, (0, 0), act_min, act_max)


def max_pool_region(
    x: np.ndarray,
    x_origin: tuple[int, int],
    geometry: Window,
    out: np.ndarray,
    out_origin: tuple[int, int],
    act_min: int,
    act_max: int,
) -> None:
    """Output region `out` from input region `x` (see `conv.conv2d_region`)."""
    sh, sw = geometry.stride_h, geometry.stride_w
    lowest = np.iinfo(x.dtype).min  # the max's starting value: padding never wins
    for y0, y1, x0, x1, xp, band in padded_bands(x, x_origin, geometry, out, out_origin, lowest):
        m = np.full(band.shape, lowest, dtype=x.dtype)
        for ky in range(geometry.kernel_h):
            for kx in range(geometry.kernel_w):
                np.maximum(m, window(xp, ky, kx, y1 - y0, x1 - x0, sh, sw), out=m)
        np.clip(m, act_min, act_max, out=m)
        band[...] = m


def prepare_region(ctx: OpContext) -> RegionRun:
    """`run_region(x, x_origin, out, out_origin)`: one output region from an input region."""
    xt, yt = ctx.tensor_in(0), ctx.tensor_out(0)
    ctx.require_dtype(xt, "int8")
    ctx.require_dtype(yt, "int8")
    if len(xt.shape) != 4 or len(yt.shape) != 4:
        raise ctx.fail("pooling needs 4-D (N, H, W, C) tensors")
    fh, fw = int(ctx.option("filter_height", 1)), int(ctx.option("filter_width", 1))
    sh, sw = int(ctx.option("stride_h", 1)), int(ctx.option("stride_w", 1))
    padding = str(ctx.option("padding", "VALID"))
    _, h, w, c = xt.shape
    _, oh, ow, yc = yt.shape
    want = (out_size(padding, h, fh, sh), out_size(padding, w, fw, sw))
    if want != (oh, ow) or yc != c:
        raise ctx.fail(
            f"output {list(yt.shape)} does not match {padding} pooling of {list(xt.shape)}"
        )
    lo, hi = activation_range(
        ctx.option("fused_activation_function", "NONE"), scale_of(yt), zero_point_of(yt)
    )
    geometry = pool_window(h, w, oh, ow, fh, fw, sh, sw)
    if ctx.op.op == "AVERAGE_POOL_2D":
        counts = window_counts(h, w, oh, ow, fh, fw, sh, sw)
        if np.any(counts <= 0):
            raise ctx.fail("a pooling window lies wholly outside the input")

        def run_region(x, x_origin, out, out_origin) -> None:
            average_pool_region(x, x_origin, geometry, out, out_origin, lo, hi, counts)

    else:

        def run_region(x, x_origin, out, out_origin) -> None:
            max_pool_region(x, x_origin, geometry, out, out_origin, lo, hi)

    return run_region


def prepare(ctx: OpContext) -> Run:
    return whole_tensor_run(ctx, prepare_region(ctx))
