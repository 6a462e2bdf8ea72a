"""ADD, int8, as TFLM's reference quantized Add (with numpy broadcasting for its
broadcast path, which computes the same per element).

Prepare (CalculateOpDataAdd): left_shift = 20, twice_max = 2 * max(s1, s2) (the larger
float32 scale), input multipliers s_i / twice_max and output multiplier
twice_max / (2**20 * s_out), each quantized with QuantizeMultiplierSmallerThanOneExp.
Per element: v_i = MBQM((q_i - zp_i) * 2**20, m_i, shift_i);
out = clamp(MBQM(v_1 + v_2, m_out, shift_out) + zp_out).
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.mcu.kernels.common import OpContext, Run, row_bands, scale_of, zero_point_of
from inferlab.engines.mcu.kernels.fixed_point import (
    activation_range,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    wrap_int32,
)

ADD_LEFT_SHIFT_INT8 = 20


def add_params(s1: float, s2: float, s_out: float, left_shift: int = ADD_LEFT_SHIFT_INT8):
    """((m1, sh1), (m2, sh2), (m_out, sh_out)) as TFLM's Add Prepare computes them."""
    twice_max = 2 * float(max(np.float32(s1), np.float32(s2)))
    reals = (s1 / twice_max, s2 / twice_max, twice_max / ((1 << left_shift) * s_out))
    out = []
    for r in reals:
        if not 0.0 < r < 1.0:
            raise ValueError(f"ADD multiplier {r} is outside (0, 1)")
        m, s = quantize_multiplier(r)
        if s > 0:
            raise ValueError(f"ADD multiplier {r} quantizes to a left shift")
        out.append((m, s))
    return tuple(out)


def add_int8(
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray,
    *,
    offsets: tuple[int, int],
    output_offset: int,
    multipliers,
    left_shift: int,
    act_min: int,
    act_max: int,
) -> None:
    """out = a + b in the quantized domain; a and b broadcast to out's shape."""
    if a.shape == b.shape == out.shape:  # flat pieces keep the temporaries small
        flat = a.reshape(-1), b.reshape(-1), out.reshape(-1)
        for s, e in row_bands(flat[2].size, 1):
            _add(flat[0][s:e], flat[1][s:e], flat[2][s:e], offsets, output_offset, multipliers,
                 left_shift, act_min, act_max)  # fmt: skip
    else:
        _add(a, b, out, offsets, output_offset, multipliers, left_shift, act_min, act_max)


def _add(a, b, out, offsets, output_offset, multipliers, left_shift, act_min, act_max) -> None:
    (m1, s1), (m2, s2), (mo, so) = multipliers
    va = wrap_int32((a.astype(np.int64) + offsets[0]) << left_shift)
    vb = wrap_int32((b.astype(np.int64) + offsets[1]) << left_shift)
    raw = wrap_int32(
        multiply_by_quantized_multiplier(va, m1, s1) + multiply_by_quantized_multiplier(vb, m2, s2)
    )
    y = multiply_by_quantized_multiplier(raw, mo, so) + output_offset
    np.clip(y, act_min, act_max, out=y)
    out[...] = np.broadcast_to(y, out.shape)


def prepare(ctx: OpContext) -> Run:
    at, bt, yt = ctx.tensor_in(0), ctx.tensor_in(1), ctx.tensor_out(0)
    for t in (at, bt, yt):
        ctx.require_dtype(t, "int8")
    try:
        np.broadcast_shapes(at.shape, bt.shape, yt.shape)
        if np.broadcast_shapes(at.shape, bt.shape) != tuple(yt.shape):
            raise ValueError
    except ValueError:
        raise ctx.fail(f"shapes {list(at.shape)} + {list(bt.shape)} -> {list(yt.shape)}") from None
    try:
        multipliers = add_params(scale_of(at), scale_of(bt), scale_of(yt))
    except ValueError as exc:
        raise ctx.fail(str(exc)) from None
    y_zp = zero_point_of(yt)
    lo, hi = activation_range(ctx.option("fused_activation_function", "NONE"), scale_of(yt), y_zp)
    params = dict(
        offsets=(-zero_point_of(at), -zero_point_of(bt)),
        output_offset=y_zp,
        multipliers=multipliers,
        left_shift=ADD_LEFT_SHIFT_INT8,
        act_min=lo,
        act_max=hi,
    )
    a, b, out = ctx.array_in(0), ctx.array_in(1), ctx.array_out(0)

    def run() -> None:
        add_int8(a, b, out, **params)

    return run
