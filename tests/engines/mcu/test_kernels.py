"""Kernels on hand-worked examples; TFLM's fixed-point functions against exact integer math.

The references below use Python's unbounded integers and `fractions.Fraction`, never the
code under test: an exact real value, then the rounding rule TFLM's C code implements.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.mcu.kernels import fixed_point as fp
from inferlab.engines.mcu.kernels.common import out_size, pad_before
from inferlab.engines.mcu.kernels.conv import ConvParams, conv2d_int8
from inferlab.engines.mcu.kernels.depthwise import depthwise_conv2d_int8
from inferlab.engines.mcu.kernels.elementwise import add_int8, add_params
from inferlab.engines.mcu.kernels.fully_connected import fully_connected_int8, per_tensor_multiplier
from inferlab.engines.mcu.kernels.pooling import average_pool_int8, max_pool_int8, window_counts
from inferlab.engines.mcu.kernels.quantize import affine_quantize, dequantize, requantize
from inferlab.engines.mcu.kernels.reshape import reshape_into
from inferlab.engines.mcu.kernels.softmax import softmax_int8, softmax_params

int32s = st.integers(fp.INT32_MIN, fp.INT32_MAX)
multipliers = st.integers(1 << 30, (1 << 31) - 1)  # what QuantizeMultiplier produces


# ---- exact references ---------------------------------------------------------------------


def half_away(q: Fraction) -> int:
    """Nearest integer to an exact rational, ties away from zero."""
    n = math.floor(abs(q) + Fraction(1, 2))
    return n if q >= 0 else -n


def srdhm_exact(a: int, b: int) -> int:
    """a * b / 2**31, nearest, ties toward +infinity; the one overflow saturates."""
    if a == b == fp.INT32_MIN:
        return fp.INT32_MAX
    return math.floor(Fraction(a * b, 1 << 31) + Fraction(1, 2))


def srdhm_as_c(a: int, b: int) -> int:
    """The C expression, transcribed: nudge, then division truncating toward zero."""
    if a == b == fp.INT32_MIN:
        return fp.INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    num = ab + nudge
    q = abs(num) // (1 << 31)
    return q if num >= 0 else -q


def to_int32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def mbqm_exact(x: int, m: int, shift: int) -> int:
    """Double rounding: the high multiply (ties up), then a division by 2**right (ties
    away from zero)."""
    left, right = max(shift, 0), max(-shift, 0)
    high = srdhm_exact(to_int32(x << left), m)
    return half_away(Fraction(high, 1 << right))


# ---- fixed point --------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(int32s, int32s)
def test_srdhm_equals_exact_math_and_the_c_expression(a, b):
    got = int(fp.saturating_rounding_doubling_high_mul(a, b))
    assert got == srdhm_exact(a, b) == srdhm_as_c(a, b)
    assert fp.INT32_MIN <= got <= fp.INT32_MAX


def test_srdhm_ties_go_up_not_away():
    # 3 * 2**30 / 2**31 = 1.5 -> 2 ; -1.5 -> -1 (the C nudge is asymmetric)
    assert fp.saturating_rounding_doubling_high_mul(3, 1 << 30) == 2
    assert fp.saturating_rounding_doubling_high_mul(-3, 1 << 30) == -1
    assert fp.saturating_rounding_doubling_high_mul(fp.INT32_MIN, fp.INT32_MIN) == fp.INT32_MAX


@settings(max_examples=400, deadline=None)
@given(int32s, st.integers(0, 31))
def test_rounding_divide_by_pot_is_round_half_away(x, e):
    assert int(fp.rounding_divide_by_pot(x, e)) == half_away(Fraction(x, 1 << e))


@settings(max_examples=500, deadline=None)
@given(int32s, multipliers, st.integers(-31, 0))
def test_mbqm_right_shifts_equal_exact_double_rounding(x, m, shift):
    got = int(fp.multiply_by_quantized_multiplier(x, m, shift))
    assert got == mbqm_exact(x, m, shift)
    # and it is within one of the exactly rounded real product
    assert abs(got - Fraction(x * m, 1 << (31 - shift))) <= 1


@settings(max_examples=300, deadline=None)
@given(st.integers(-(1 << 20), 1 << 20), multipliers, st.integers(1, 10))
def test_mbqm_left_shifts_equal_exact(x, m, shift):
    assert int(fp.multiply_by_quantized_multiplier(x, m, shift)) == mbqm_exact(x, m, shift)


@settings(max_examples=300, deadline=None)
@given(int32s, multipliers, st.integers(-31, 30))
def test_single_rounding_variant_is_one_floor(x, m, shift):
    got = int(fp.multiply_by_quantized_multiplier_single_rounding(x, m, shift))
    assert got == math.floor(Fraction(x * m, 1 << (31 - shift)) + Fraction(1, 2))


def test_mbqm_vectorised_per_channel():
    x = np.array([[100, -100, 7], [3, -3, 0]])
    m = np.array([1 << 30, 1 << 30, 1518500250])
    s = np.array([0, -1, -2])
    got = fp.multiply_by_quantized_multiplier(x, m, s)
    want = [
        [mbqm_exact(int(v), int(mm), int(ss)) for v, mm, ss in zip(row, m, s, strict=True)]
        for row in x
    ]
    assert got.tolist() == want
    assert got.tolist() == [[50, -25, 1], [2, -1, 0]]  # 1.5 -> 2, -0.75 -> -1


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=2.0**-40, max_value=2.0**40),
        st.floats(min_value=1e-6, max_value=10.0),
    )
)
def test_quantize_multiplier_is_the_nearest_q31_mantissa(r):
    m, shift = fp.quantize_multiplier(r)
    if shift == 0 and m == 0:
        assert r < 2.0**-31
        return
    assert (1 << 30) <= m < (1 << 31)
    unit = Fraction(2) ** (shift - 31)  # the value of m's last bit
    exact = Fraction(r) / unit  # the mantissa TFLM rounds, exactly
    assert m == half_away(exact)
    assert abs(m * unit - Fraction(r)) <= unit / 2


def test_quantize_multiplier_edges():
    assert fp.quantize_multiplier(0.0) == (0, 0)
    assert fp.quantize_multiplier(0.5) == (1 << 30, 0)
    assert fp.quantize_multiplier(1.0) == (1 << 30, 1)
    assert fp.quantize_multiplier(0.25) == (1 << 30, -1)
    # a mantissa that rounds up to 2**31 is halved and the shift bumped
    assert fp.quantize_multiplier(1.0 - 2.0**-40) == (1 << 30, 1)
    assert fp.quantize_multiplier(2.0**-40) == (0, 0)  # flushed: shift would be < -31
    assert fp.quantize_multiplier_single_rounding(2.0**40) == ((1 << 31) - 1, 30)


def test_round_half_away():
    assert [fp.round_half_away(v) for v in (0.5, -0.5, 1.5, -1.5, 2.4999, -2.5)] == [
        1,
        -1,
        2,
        -2,
        2,
        -3,
    ]


@settings(max_examples=200, deadline=None)
@given(st.integers(-(31 << 26), 0))
def test_exp_on_negative_values_is_close_to_exp(raw):
    got = int(fp.exp_on_negative_values(raw, 5))
    want = math.exp(raw / 2**26)
    assert abs(got / 2**31 - want) < 5e-7  # gemmlowp's polynomial, not correctly rounded
    assert 0 <= got <= fp.INT32_MAX


def test_exp_on_negative_values_fixed_points():
    assert fp.exp_on_negative_values(0, 5) == fp.INT32_MAX  # exp(0) = 1 saturates Q0.31
    assert abs(int(fp.exp_on_negative_values(-(1 << 26), 5)) / 2**31 - math.exp(-1)) < 5e-7


@settings(max_examples=200, deadline=None)
@given(st.integers(0, fp.INT32_MAX))
def test_one_over_one_plus_x(raw):
    got = int(fp.one_over_one_plus_x_for_x_in_0_1(raw)) / 2**31
    assert abs(got - 1 / (1 + raw / 2**31)) < 1e-8


@settings(max_examples=200, deadline=None)
@given(st.integers(1 << 19, (1 << 31) - 1))
def test_get_reciprocal(x):
    r, bits = fp.get_reciprocal(x, 12)
    value = x / 2**19  # Q12.19
    assert int(bits) == 12 - (32 - x.bit_length())
    assert abs(int(r) / 2**31 * 2.0 ** -int(bits) - 1 / value) < 1e-8 * 2.0 ** -int(bits) * 4


def test_activation_ranges():
    assert fp.activation_range("NONE", 0.1, 3) == (-128, 127)
    assert fp.activation_range("RELU", 0.1, -128) == (-128, 127)
    assert fp.activation_range("RELU", 0.1, 5) == (5, 127)
    assert fp.activation_range("RELU6", 6 / 255, -128) == (-128, 127)
    assert fp.activation_range("RELU6", 0.05, -10) == (-10, 110)  # 6 / 0.05 = 120
    assert fp.activation_range("RELU_N1_TO_1", 0.01, 0) == (-100, 100)
    with pytest.raises(ValueError, match="TANH"):
        fp.activation_range("TANH", 0.1, 0)


# ---- geometry -----------------------------------------------------------------------------


def test_padding_and_output_sizes():
    assert out_size("SAME", 7, 3, 2) == 4
    assert out_size("VALID", 7, 3, 2) == 3
    assert out_size("VALID", 9, 3, 1, dilation=2) == 5
    assert pad_before(2, 1, 7, 3, 4) == 1  # total 2: one before, one after
    assert pad_before(2, 1, 8, 3, 4) == 0  # total 1: the extra row goes after
    assert pad_before(1, 1, 7, 3, 5) == 0  # VALID never pads
    assert window_counts(2, 2, 2, 2, 3, 3, 1, 1).tolist() == [[4, 4], [4, 4]]
    assert window_counts(3, 3, 3, 3, 3, 3, 1, 1).tolist() == [[4, 6, 4], [6, 9, 6], [4, 6, 4]]


# ---- kernels on hand-worked numbers -------------------------------------------------------


def _params(multiplier=1 << 30, shift=0, channels=1, **kw):
    base = dict(
        stride_h=1,
        stride_w=1,
        dilation_h=1,
        dilation_w=1,
        pad_h=0,
        pad_w=0,
        input_offset=0,
        output_offset=0,
        multiplier=np.full(channels, multiplier, dtype=np.int64),
        shift=np.full(channels, shift, dtype=np.int64),
        act_min=-128,
        act_max=127,
    )
    base.update(kw)
    return ConvParams(**base)


def test_conv_3x3_same_skips_taps_outside_the_image():
    # 3x3 input of (q - zp) = 1..9, all-ones 3x3 filter, multiplier 1/2 (2**30, shift 0).
    zp = 4
    x = (np.arange(1, 10).reshape(1, 3, 3, 1) + zp).astype(np.int8)
    w = np.ones((1, 3, 3, 1), dtype=np.int8)
    out = np.zeros((1, 3, 3, 1), dtype=np.int8)
    conv2d_int8(x, w, None, out, _params(pad_h=1, pad_w=1, input_offset=-zp))
    sums = np.array([[12, 21, 16], [27, 45, 33], [24, 39, 28]])  # window sums of 1..9
    # 45 / 2 = 22.5 rounds up to 23 (ties go up in the high multiply); 21/2 -> 11, 27/2 -> 14
    assert out[0, :, :, 0].tolist() == ((sums + 1) // 2).tolist()


def test_conv_bias_per_channel_shift_and_clamp():
    x = np.array([[[[10, -3]]]], dtype=np.int8)
    w = np.array([[[[2, 1]]], [[[-1, 4]]]], dtype=np.int8)  # (2, 1, 1, 2)
    bias = np.array([3, -100], dtype=np.int32)
    out = np.zeros((1, 1, 1, 2), dtype=np.int8)
    p = _params(channels=2, output_offset=-5, act_min=-20, act_max=127)
    p = ConvParams(**{**p.__dict__, "shift": np.array([0, -1])})
    conv2d_int8(x, w, bias, out, p)
    # ch0: 10*2 + (-3)*1 + 3 = 20 -> 20/2 = 10 -> +(-5) = 5
    # ch1: -10 - 12 - 100 = -122 -> -122/4 = -30.5 -> SRDHM(-122, 2**30) = -61 -> /2 = -30.5
    #      -> away from zero: -31 -> -36 -> clamped to -20
    assert out.ravel().tolist() == [5, -20]


def test_conv_stride_and_dilation():
    x = np.arange(25, dtype=np.int8).reshape(1, 5, 5, 1)
    w = np.zeros((1, 3, 3, 1), dtype=np.int8)
    w[0, 0, 0, 0] = 2  # picks the top-left tap only
    out = np.zeros((1, 1, 1, 1), dtype=np.int8)
    conv2d_int8(x, w, None, out, _params(stride_h=2, stride_w=2, dilation_h=2, dilation_w=2))
    assert out.item() == 0  # tap (0, 0) of the only window
    w[0, 0, 0, 0], w[0, 2, 2, 0] = 0, 2  # bottom-right tap at dilation 2 is x[4, 4] = 24
    conv2d_int8(x, w, None, out, _params(dilation_h=2, dilation_w=2))
    assert out.item() == 24


def test_depthwise_multiplier_orders_channels_as_tflm():
    x = np.array([[[[3, -2]]]], dtype=np.int8)  # 1x1 image, 2 channels
    w = np.array([[[[1, 2, 3, 4]]]], dtype=np.int8)  # depth multiplier 2: oc = ic * 2 + m
    out = np.zeros((1, 1, 1, 4), dtype=np.int8)
    p = _params(multiplier=1 << 30, shift=1, channels=4)  # x 1.0
    depthwise_conv2d_int8(x, w, None, out, p, depth_multiplier=2)
    assert out.ravel().tolist() == [3, 6, -6, -8]


def test_fully_connected_offsets_and_bias():
    x = np.array([[1, 2, 3]], dtype=np.int8)
    w = np.array([[1, 0, -1], [2, 2, 2]], dtype=np.int8)
    out = np.zeros((1, 2), dtype=np.int8)
    fully_connected_int8(
        x,
        w,
        np.array([10, 0], dtype=np.int32),
        out,
        input_offset=-1,
        filter_offset=1,
        output_offset=-128,
        multiplier=1 << 30,
        shift=1,
        act_min=-128,
        act_max=127,
    )
    # (x - 1) = [0, 1, 2]; (w + 1) = [[2, 1, 0], [3, 3, 3]] -> [1, 9] + bias [10, 0] = [11, 9]
    assert out.ravel().tolist() == [11 - 128, 9 - 128]


def test_fully_connected_multiplier_multiplies_scales_in_float32():
    a, b, c = 0.1, 0.3, 0.7
    m, s = per_tensor_multiplier(a, b, c)
    assert (m, s) == fp.quantize_multiplier(float(np.float32(a) * np.float32(b)) / c)


def test_average_pool_rounds_half_away_from_zero():
    x = np.array([[[[1, -1], [2, -2]], [[3, -3], [4, -4]]]], dtype=np.int8)
    out = np.zeros((1, 1, 1, 2), dtype=np.int8)
    average_pool_int8(x, out, 2, 2, 2, 2, -128, 127)
    assert out.ravel().tolist() == [3, -3]  # 10/4 = 2.5 -> 3, -2.5 -> -3


def test_average_pool_same_counts_only_inside_taps():
    x = np.full((1, 2, 2, 1), 10, dtype=np.int8)
    out = np.zeros((1, 2, 2, 1), dtype=np.int8)
    average_pool_int8(x, out, 3, 3, 1, 1, -128, 127)
    assert out.ravel().tolist() == [10, 10, 10, 10]  # padding is not averaged in


def test_max_pool_padding_never_wins_and_clamps():
    x = np.full((1, 2, 2, 1), -100, dtype=np.int8)
    out = np.zeros((1, 1, 1, 1), dtype=np.int8)
    max_pool_int8(x, out, 3, 3, 2, 2, -128, 127)
    assert out.item() == -100
    max_pool_int8(x, out, 3, 3, 2, 2, -50, 127)
    assert out.item() == -50


def test_softmax_uniform_rows():
    m, s, dmin = softmax_params(1.0, 0.1)
    for depth, want in ((1, 127), (2, 0), (4, -64), (8, -96)):
        x = np.full((1, depth), 7, dtype=np.int8)
        out = np.zeros_like(x)
        softmax_int8(x, out, m, s, dmin)
        assert out.ravel().tolist() == [want] * depth  # 256 / depth - 128, 1.0 saturates


def test_softmax_tiny_entries_are_the_minimum():
    m, s, dmin = softmax_params(1.0, 1.0)  # diff of -127 is e**-127: far below diff_min
    assert dmin > -127
    x = np.array([[127, -128, 127]], dtype=np.int8)
    out = np.zeros_like(x)
    softmax_int8(x, out, m, s, dmin)
    assert out.ravel().tolist() == [0, -128, 0]


def test_add_with_equal_scales_is_plain_addition():
    mults = add_params(1.0, 1.0, 1.0)
    a = np.array([3, -4, 100, -100], dtype=np.int8)
    b = np.array([4, -4, 100, -100], dtype=np.int8)
    out = np.zeros(4, dtype=np.int8)
    add_int8(a, b, out, offsets=(0, 0), output_offset=0, multipliers=mults, left_shift=20,
             act_min=-128, act_max=127)  # fmt: skip
    assert out.tolist() == [7, -8, 127, -128]


def test_quantize_requantize_dequantize():
    out = np.zeros(6, dtype=np.int8)
    affine_quantize(np.array([0.5, -0.5, 1.5, -2.5, 300.0, -300.0], np.float32), out, 1.0, 0)
    assert out.tolist() == [1, -1, 2, -3, 127, -128]
    out2 = np.zeros(3, dtype=np.int8)
    m, s = fp.quantize_multiplier(0.5)
    requantize(np.array([10, -10, 3], np.int8), out2, m, s, 2, -1)
    assert out2.tolist() == [3, -7, 0]  # (8, -12, 1) / 2 -> 4, -6, 0.5 -> 1; then -1
    f = np.zeros(3, dtype=np.float32)
    dequantize(np.array([-128, 0, 127], np.int8), f, 0.5, -128)
    assert f.tolist() == [0.0, 64.0, 127.5]


def test_reshape_copies_unless_aliased():
    arena = bytearray(16)
    a = np.frombuffer(arena, np.int8, 6, 0).reshape(2, 3)
    b = np.frombuffer(arena, np.int8, 6, 8).reshape(3, 2)
    a[...] = np.arange(6).reshape(2, 3)
    reshape_into(a, b)
    assert b.tolist() == [[0, 1], [2, 3], [4, 5]]
    alias = np.frombuffer(arena, np.int8, 6, 0).reshape(6)
    reshape_into(a, alias)  # same bytes: nothing to do, nothing broken
    assert alias.tolist() == [0, 1, 2, 3, 4, 5]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(int32s, min_size=1, max_size=8),
    multipliers,
    st.integers(-31, 0),
    st.integers(-128, 127),
)
def test_requantize_in_place_path_equals_mbqm(accs, m, shift, zp):
    from inferlab.engines.mcu.kernels.common import requantize_into

    acc = np.array(accs, dtype=np.int64)
    out = np.zeros(len(accs), dtype=np.int8)
    requantize_into(acc, m, shift, zp, -128, 127, out)
    want = [max(-128, min(127, mbqm_exact(a, m, shift) + zp)) for a in accs]
    assert out.tolist() == want
