"""What every kernel shares: the operator's arrays, quantization lookups, padding, requantize.

A kernel module exposes `prepare(ctx) -> run`: `prepare` reads the operator's options and
its tensors' quantization once (as TFLM's Prepare does) and returns a no-argument `run`
that reads its input arrays and writes its output array in place. Sliding-window kernels
also expose `prepare_region(ctx) -> run_region` (see `RegionRun` and `Window`): the same
arithmetic for one rectangle of output rows and columns, given the input rows and columns
it reads; their `run` is that over the whole tensor. The arrays are whatever
the interpreter hands over in `OpContext.arrays`: numpy views into the one arena for
activations, read-only views into the model file for constants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from inferlab.engines.mcu.graph import Model, Operator, Tensor
from inferlab.engines.mcu.kernels.fixed_point import multiply_by_quantized_multiplier

Run = Callable[[], None]

# run_region(x, x_origin, out, out_origin): compute the output region `out` (a view of
# N x rows x cols x C) whose first row and column sit at `out_origin` in the op's whole
# output, reading the input region `x` whose first row and column sit at `x_origin` in
# the whole input. Sliding-window ops expose one (`REGION_KERNELS`) so that they can run
# a patch at a time (engines.mcu.patching); the whole op is the one-region case.
RegionRun = Callable[[np.ndarray, tuple[int, int], np.ndarray, tuple[int, int]], None]


class UnsupportedOpError(ValueError):
    """An operator (or an operator configuration) the interpreter has no kernel for."""


@dataclass(frozen=True)
class OpContext:
    """One operator and the arrays of every tensor (None where a tensor has no array)."""

    model: Model
    op: Operator
    arrays: Sequence[np.ndarray | None]

    def tensor_in(self, k: int) -> Tensor | None:
        i = self.op.inputs[k] if k < len(self.op.inputs) else -1
        return self.model.tensors[i] if i >= 0 else None

    def tensor_out(self, k: int) -> Tensor:
        return self.model.tensors[self.op.outputs[k]]

    def array_in(self, k: int) -> np.ndarray | None:
        i = self.op.inputs[k] if k < len(self.op.inputs) else -1
        return self.arrays[i] if i >= 0 else None

    def array_out(self, k: int) -> np.ndarray:
        out = self.arrays[self.op.outputs[k]]
        if out is None:
            raise UnsupportedOpError(f"{self.where}: output {k} has no arena buffer")
        return out

    def option(self, name: str, default=None):
        return self.op.options.get(name, default)

    @property
    def where(self) -> str:
        return f"operator {self.op.index} ({self.op.op})"

    def fail(self, why: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self.where}: {why}")

    def require_dtype(self, tensor: Tensor | None, *dtypes: str) -> None:
        if tensor is None:
            raise self.fail(f"a required tensor is missing (needs {'/'.join(dtypes)})")
        if tensor.dtype not in dtypes:
            raise self.fail(
                f"tensor {tensor.index} {tensor.name!r} is {tensor.dtype}; this kernel takes "
                f"{'/'.join(dtypes)} (the arena interpreter runs integer-quantized models)"
            )

    def require_int8_filter_op(self) -> None:
        """What CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED take: int8 input, filter and
        output, and an int32 bias where there is one."""
        self.require_dtype(self.tensor_in(0), "int8")
        self.require_dtype(self.tensor_in(1), "int8")
        self.require_dtype(self.tensor_out(0), "int8")
        if self.tensor_in(2) is not None:
            self.require_dtype(self.tensor_in(2), "int32")


def whole_tensor_run(ctx: OpContext, run_region: RegionRun) -> Run:
    """The op over its whole input and output arrays: one region from (0, 0)."""
    x, out = ctx.array_in(0), ctx.array_out(0)

    def run() -> None:
        run_region(x, (0, 0), out, (0, 0))

    return run


def scale_of(t: Tensor) -> float:
    """The per-tensor scale (a float32 value widened exactly to a Python float)."""
    if t.quantization is None or not t.quantization.scale:
        raise UnsupportedOpError(f"tensor {t.index} {t.name!r} has no quantization scale")
    return t.quantization.scale[0]


def zero_point_of(t: Tensor) -> int:
    if t.quantization is None or not t.quantization.zero_point:
        return 0
    return int(t.quantization.zero_point[0])


def scales_of(t: Tensor) -> tuple[float, ...]:
    if t.quantization is None or not t.quantization.scale:
        raise UnsupportedOpError(f"tensor {t.index} {t.name!r} has no quantization scale")
    return t.quantization.scale


# ---- geometry ---------------------------------------------------------------------------


def out_size(padding: str, in_size: int, filter_size: int, stride: int, dilation: int = 1) -> int:
    """TFLM's ComputeOutSize."""
    effective = (filter_size - 1) * dilation + 1
    if stride == 0:
        return 0
    if padding == "SAME":
        return (in_size + stride - 1) // stride
    if padding == "VALID":
        return (in_size + stride - effective) // stride
    raise UnsupportedOpError(f"padding {padding!r}")


def pad_before(stride: int, dilation: int, in_size: int, filter_size: int, out_len: int) -> int:
    """TFLM's ComputePaddingWithOffset: the padding before the first row (extra goes after)."""
    effective = (filter_size - 1) * dilation + 1
    total = max(0, (out_len - 1) * stride + effective - in_size)
    return total // 2


def padded(x: np.ndarray, pad_h: int, pad_w: int, need_h: int, need_w: int, fill) -> np.ndarray:
    """x (N, H, W, C) placed at (pad_h, pad_w) inside a new (N, need_h, need_w, C) array of
    `fill`, cropped where the window never reaches. Returns x itself when no padding is
    needed."""
    n, h, w, c = x.shape
    if pad_h == 0 and pad_w == 0 and need_h <= h and need_w <= w:
        return x
    out = np.full((n, max(need_h, pad_h), max(need_w, pad_w), c), fill, dtype=x.dtype)
    rows = min(h, out.shape[1] - pad_h)
    cols = min(w, out.shape[2] - pad_w)
    out[:, pad_h : pad_h + rows, pad_w : pad_w + cols, :] = x[:, :rows, :cols, :]
    return out


def window(
    xp: np.ndarray, ky: int, kx: int, oh: int, ow: int, sh: int, sw: int, dh: int = 1, dw: int = 1
) -> np.ndarray:
    """The (N, oh, ow, C) strided view of tap (ky, kx) of a padded input: a view, no copy."""
    y0, x0 = ky * dh, kx * dw
    return xp[:, y0 : y0 + (oh - 1) * sh + 1 : sh, x0 : x0 + (ow - 1) * sw + 1 : sw, :]


@dataclass(frozen=True)
class Window:
    """A sliding-window op's geometry along H and W, in whole-tensor coordinates.

    Output row y reads input rows y * stride_h - pad_h + k * dilation_h for k < kernel_h
    (columns likewise); rows outside 0..in_h - 1 are padding. This is what lets an op be
    computed a region at a time: `rows_read` / `cols_read` say which input rows and columns
    an output region needs (clipped to the image), and `gather` cuts them out of an input
    region and says how much padding surrounds them.
    """

    in_h: int
    in_w: int
    kernel_h: int
    kernel_w: int
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1
    pad_h: int = 0
    pad_w: int = 0

    def _span(self, o0: int, o1: int, stride: int, dilation: int, kernel: int, pad: int):
        first = o0 * stride - pad
        need = (o1 - o0 - 1) * stride + (kernel - 1) * dilation + 1
        return first, need

    def rows_read(self, y0: int, y1: int) -> tuple[int, int]:
        """Input rows [r0, r1) inside the image that output rows [y0, y1) read."""
        first, need = self._span(y0, y1, self.stride_h, self.dilation_h, self.kernel_h, self.pad_h)
        return max(0, first), min(self.in_h, first + need)

    def cols_read(self, x0: int, x1: int) -> tuple[int, int]:
        """Input columns [c0, c1) inside the image that output columns [x0, x1) read."""
        first, need = self._span(x0, x1, self.stride_w, self.dilation_w, self.kernel_w, self.pad_w)
        return max(0, first), min(self.in_w, first + need)

    def gather(
        self, x: np.ndarray, origin: tuple[int, int], y0: int, y1: int, x0: int, x1: int
    ) -> tuple[np.ndarray, int, int, int, int]:
        """What output rows [y0, y1) x columns [x0, x1) read from `x`, an input region whose
        first row and column are `origin` in the whole input: (view of x, padding above,
        padding left, rows needed, columns needed), for `padded`."""
        top, need_h = self._span(y0, y1, self.stride_h, self.dilation_h, self.kernel_h, self.pad_h)
        left, need_w = self._span(x0, x1, self.stride_w, self.dilation_w, self.kernel_w, self.pad_w)
        r0, r1 = max(0, top), min(self.in_h, top + need_h)
        c0, c1 = max(0, left), min(self.in_w, left + need_w)
        oy, ox = origin
        if r0 < oy or c0 < ox or r1 - oy > x.shape[1] or c1 - ox > x.shape[2]:
            raise ValueError(
                f"input region rows {oy}..{oy + x.shape[1]}, columns {ox}..{ox + x.shape[2]} "
                f"does not hold rows {r0}..{r1}, columns {c0}..{c1} that output rows "
                f"{y0}..{y1}, columns {x0}..{x1} read"
            )
        rows = x[:, max(0, r0 - oy) : max(0, r1 - oy), max(0, c0 - ox) : max(0, c1 - ox)]
        return rows, r0 - top, c0 - left, need_h, need_w


def region_bands(out: np.ndarray, out_origin: tuple[int, int]):
    """(y0, y1, x0, x1, out band) per band of output rows of the region `out` whose first
    row and column are `out_origin` in the whole output; bands as `row_bands` cuts them."""
    n, rh, rw, c = out.shape
    oy, ox = out_origin
    for b0, b1 in row_bands(rh, n * rw * c):
        yield oy + b0, oy + b1, ox, ox + rw, out[:, b0:b1]


def padded_bands(
    x: np.ndarray,
    x_origin: tuple[int, int],
    geometry: Window,
    out: np.ndarray,
    out_origin: tuple[int, int],
    fill,
    input_offset: int | None = None,
):
    """(y0, y1, x0, x1, padded input rows, out band) per band of output rows of the region
    `out` (see `region_bands`): the input rows the band reads, cut from the input region
    `x` (`Window.gather`) and padded with `fill` (`padded`). With `input_offset` the rows
    are first widened to int32 and offset (the conv kernels' input - zero point)."""
    for y0, y1, x0, x1, band in region_bands(out, out_origin):
        rows, pad_top, pad_left, need_h, need_w = geometry.gather(x, x_origin, y0, y1, x0, x1)
        if input_offset is not None:
            rows = rows.astype(np.int32)
            rows += input_offset
        yield y0, y1, x0, x1, padded(rows, pad_top, pad_left, need_h, need_w, fill), band


# ---- bounded temporaries -----------------------------------------------------------------

# Kernels work through their output in bands of whole rows holding about this many values,
# so that numpy's temporaries (int32 accumulators, int64 requantisation) stay a few tens
# of KiB whatever the layer size, the way an MCU kernel library bounds its scratch buffer.
BAND_VALUES = 4096


def row_bands(rows: int, values_per_row: int, budget: int | None = None):
    """(start, stop) ranges covering `rows`, each about `budget` (default `BAND_VALUES`)
    values, at least one row."""
    budget = BAND_VALUES if budget is None else budget
    step = max(1, budget // max(1, values_per_row))
    for start in range(0, rows, step):
        yield start, min(rows, start + step)


def input_rows(x: np.ndarray, y0: int, y1: int, stride: int, dilation: int, kernel: int, pad: int):
    """The input rows output rows [y0, y1) read: (rows view, padding above it, rows needed).

    Row y reads input rows y * stride - pad + k * dilation for k < kernel."""
    first = y0 * stride - pad
    need = (y1 - y0 - 1) * stride + (kernel - 1) * dilation + 1
    lo, hi = max(0, first), min(x.shape[1], first + need)
    return x[:, lo:hi], lo - first, need


# ---- requantization ---------------------------------------------------------------------


def requantize_into(
    acc: np.ndarray,
    multiplier,
    shift,
    output_zero_point: int,
    act_min: int,
    act_max: int,
    out: np.ndarray,
) -> None:
    """out = clamp(MultiplyByQuantizedMultiplier(acc, m, s) + zp, act_min, act_max).

    `multiplier` and `shift` are scalars or per-channel arrays broadcast along the last
    axis. When no shift is a left shift (every conv/FC layer seen so far), the double
    rounding runs in place on one int64 copy of `acc`; otherwise the general function.
    """
    shift = np.asarray(shift, dtype=np.int64)
    if np.any(shift > 0):
        v = multiply_by_quantized_multiplier(acc, multiplier, shift)
    else:
        # SaturatingRoundingDoublingHighMul: floor(acc * m / 2**31 + 1/2); m >= 0 so the
        # one saturating case (both operands -2**31) cannot occur.
        v = acc.astype(np.int64)
        v *= np.asarray(multiplier, dtype=np.int64)
        v += 1 << 30
        v >>= 31
        # RoundingDivideByPOT by -shift, ties away from zero: add one when the remainder
        # exceeds half the divisor minus (1 if v >= 0 else 0).
        right = -shift
        mask = (np.int64(1) << right) - 1
        remainder = v & mask
        remainder -= v < 0
        bump = remainder > (mask >> 1)
        v >>= right
        v += bump
    v += output_zero_point
    np.clip(v, act_min, act_max, out=v)
    out[...] = v.reshape(out.shape)
