"""TFLM's integer arithmetic, elementwise over numpy arrays, bit for bit.

Every function here computes what TensorFlow Lite Micro's reference kernels compute on
int32 values (`tensorflow/lite/kernels/internal/common.h`, `quantization_util.cc` and
gemmlowp's `fixedpoint.h`), but vectorised: values travel as int64 arrays so that the
int32 products and sums never overflow in numpy, and are wrapped back to int32 where the
C code relies on int32 wrap-around.

Rounding, as the C code does it (x a real number, shown exactly):

- `saturating_rounding_doubling_high_mul(a, b)` = floor(a * b / 2**31 + 1/2): the C code
  adds a nudge of +2**30 or 1 - 2**30 and divides with truncation toward zero, which is
  round-half-up (toward +inf), not half-away-from-zero; (-2**31) * (-2**31) saturates
  to 2**31 - 1.
- `rounding_divide_by_pot(x, e)` = x / 2**e rounded to nearest, ties away from zero.
- `multiply_by_quantized_multiplier(x, m, s)` is the double-rounding form TFLM builds by
  default (`TFLITE_SINGLE_ROUNDING` unset): rounding_divide_by_pot(
  saturating_rounding_doubling_high_mul(x * 2**max(s, 0), m), max(-s, 0)).
  `multiply_by_quantized_multiplier_single_rounding` is the other build's form,
  floor((x * m + 2**(30 - s)) / 2**(31 - s)).
- `quantize_multiplier(r)` = (round_half_away(frexp(r).mantissa * 2**31), exponent), with
  TFLM's corrections (a mantissa that rounds to 2**31 halves it; exponents below -31
  flush to zero).

The softmax helpers (`exp_on_negative_values`, `one_over_one_plus_x_for_x_in_0_1`,
`get_reciprocal`) follow gemmlowp's fixed-point formats Qm.n named by their integer bits.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

_I64 = np.int64


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=_I64)


def wrap_int32(x) -> np.ndarray:
    """Two's-complement wrap of int64 values to the int32 range (as C's int32 does)."""
    x = _i64(x)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def round_half_away(value: float) -> int:
    """C's std::round on a double (TfLiteRound): nearest integer, ties away from zero."""
    if not math.isfinite(value):
        raise ValueError(f"cannot round {value!r} to an integer")
    a = abs(value)
    f = math.floor(a)
    r = f + 1 if a - f >= 0.5 else f  # a - f is exact for doubles
    return int(r if value >= 0 else -r)


def round_half_away_f32(value) -> int:
    """std::round on a float32: the same rule, applied to the float32 value."""
    return round_half_away(float(np.float32(value)))


# ---- the core primitives --------------------------------------------------------------


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int32 values (VQRDMULH)."""
    a, b = _i64(a), _i64(b)
    high = (a * b + (1 << 30)) >> 31
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    return np.where(overflow, INT32_MAX, high)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: x / 2**exponent, nearest, ties away from zero."""
    x, e = _i64(x), _i64(exponent)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLM's MultiplyByQuantizedMultiplier (int32 x), the double-rounding build."""
    x, m, s = _i64(x), _i64(multiplier), _i64(shift)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    shifted = wrap_int32(x << left)  # C: x * (1 << left_shift) in int32
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, m), right)


def multiply_by_quantized_multiplier_single_rounding(x, multiplier, shift) -> np.ndarray:
    """TFLM's MultiplyByQuantizedMultiplier when built with TFLITE_SINGLE_ROUNDING=1."""
    x, m, s = _i64(x), _i64(multiplier), _i64(shift)
    total = 31 - s
    return (x * m + (np.int64(1) << (total - 1))) >> total


def multiply_by_quantized_multiplier_greater_than_one(x, multiplier, left_shift) -> np.ndarray:
    """TFLM's MultiplyByQuantizedMultiplierGreaterThanOne (double rounding)."""
    x = wrap_int32(_i64(x) << _i64(left_shift))
    return saturating_rounding_doubling_high_mul(x, multiplier)


def saturating_rounding_multiply_by_pot(x, exponent: int) -> np.ndarray:
    """gemmlowp's SaturatingRoundingMultiplyByPOT<exponent> on int32 values."""
    x = _i64(x)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    out = x << exponent
    out = np.where(x > threshold, INT32_MAX, out)
    return np.where(x < -threshold, INT32_MIN, out)


def rounding_half_sum(a, b) -> np.ndarray:
    """gemmlowp's RoundingHalfSum: (a + b) / 2, ties away from zero."""
    s = _i64(a) + _i64(b)
    sign = np.where(s >= 0, 1, -1)
    t = s + sign
    return np.where(t >= 0, t // 2, -((-t) // 2))  # C division truncates toward zero


def count_leading_zeros_u32(x) -> np.ndarray:
    """Leading zero bits of x read as uint32 (32 for 0)."""
    u = _i64(x) & 0xFFFFFFFF
    _, exp = np.frexp(u.astype(np.float64))  # exact: u < 2**53
    return np.where(u == 0, 32, 32 - exp).astype(_I64)


# ---- multipliers from real scales ------------------------------------------------------


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """TFLM's QuantizeMultiplier: real = multiplier * 2**(shift - 31), multiplier in [2**30, 2**31)."""
    if real_multiplier == 0.0:
        return 0, 0
    q, shift = math.frexp(real_multiplier)
    q_fixed = round_half_away(q * (1 << 31))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        shift, q_fixed = 0, 0
    return int(q_fixed), int(shift)


def quantize_multiplier_single_rounding(real_multiplier: float) -> tuple[int, int]:
    """QuantizeMultiplier as built with TFLITE_SINGLE_ROUNDING=1 (shift capped at 30)."""
    q, shift = quantize_multiplier(real_multiplier)
    if shift > 30:
        return (1 << 31) - 1, 30
    return q, shift


def quantize_multipliers(real_multipliers) -> tuple[np.ndarray, np.ndarray]:
    """`quantize_multiplier` over a sequence: (multipliers, shifts) as int64 arrays."""
    pairs = [quantize_multiplier(float(r)) for r in real_multipliers]
    return (
        np.array([p[0] for p in pairs], dtype=_I64),
        np.array([p[1] for p in pairs], dtype=_I64),
    )


def quantize_f32(value: float, scale: float, zero_point: int) -> int:
    """TFLM's activation-range Quantize: zero_point + round(float(value) / float(scale))."""
    q = np.float32(value) / np.float32(scale)
    return zero_point + round_half_away_f32(q)


def activation_range(
    activation: str, scale: float, zero_point: int, qmin: int = -128, qmax: int = 127
) -> tuple[int, int]:
    """TFLM's CalculateActivationRangeQuantized: the clamp a fused activation implies."""
    if activation in (None, "NONE"):
        return qmin, qmax
    if activation == "RELU":
        return max(qmin, quantize_f32(0.0, scale, zero_point)), qmax
    if activation == "RELU6":
        return (
            max(qmin, quantize_f32(0.0, scale, zero_point)),
            min(qmax, quantize_f32(6.0, scale, zero_point)),
        )
    if activation == "RELU_N1_TO_1":
        return (
            max(qmin, quantize_f32(-1.0, scale, zero_point)),
            min(qmax, quantize_f32(1.0, scale, zero_point)),
        )
    raise ValueError(f"fused activation {activation} has no integer clamp in TFLM's kernels")


# ---- gemmlowp fixed-point math used by the int8 softmax --------------------------------

_EXP_BARREL = (
    (-2, 1672461947),
    (-1, 1302514674),
    (0, 790015084),
    (1, 290630308),
    (2, 39332535),
    (3, 720401),
    (4, 242),
)  # (exponent, raw of exp(-2**exponent))


def exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), a and result in Q0.31: Taylor series around -1/8."""
    a = _i64(a)
    constant_term = 1895147668  # exp(-1/8)
    one_third = 715827883
    x = wrap_int32(a + (1 << 28))
    x2 = saturating_rounding_doubling_high_mul(x, x)
    x3 = saturating_rounding_doubling_high_mul(x2, x)
    x4 = saturating_rounding_doubling_high_mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    inner = wrap_int32(
        saturating_rounding_doubling_high_mul(wrap_int32(x4_over_4 + x3), one_third) + x2
    )
    poly = rounding_divide_by_pot(inner, 1)
    return wrap_int32(
        constant_term + saturating_rounding_doubling_high_mul(constant_term, wrap_int32(x + poly))
    )


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """exp(a) for a <= 0 given in Q(integer_bits).(31 - integer_bits); result in Q0.31."""
    a = _i64(a)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    mask = one_quarter - 1
    a_mod_quarter_minus_quarter = wrap_int32((a & mask) - one_quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_rounding_multiply_by_pot(a_mod_quarter_minus_quarter, integer_bits)
    )
    remainder = wrap_int32(a_mod_quarter_minus_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = np.int64(1) << (fractional_bits + exponent)
            result = np.where(
                (remainder & bit) != 0,
                saturating_rounding_doubling_high_mul(result, multiplier),
                result,
            )
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))  # -32.0
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """1 / (1 + a) for a in [0, 1) in Q0.31: three Newton-Raphson steps in Q2.29."""
    half_denominator = rounding_half_sum(a, INT32_MAX)
    constant_48_over_17 = 1515870810
    constant_neg_32_over_17 = -1010580540
    one_q2 = 1 << 29
    x = wrap_int32(
        constant_48_over_17
        + saturating_rounding_doubling_high_mul(half_denominator, constant_neg_32_over_17)
    )
    for _ in range(3):
        half_denominator_times_x = saturating_rounding_doubling_high_mul(half_denominator, x)
        one_minus = wrap_int32(one_q2 - half_denominator_times_x)
        x = wrap_int32(
            x
            + saturating_rounding_multiply_by_pot(
                saturating_rounding_doubling_high_mul(x, one_minus), 2
            )
        )
    return saturating_rounding_multiply_by_pot(x, 1)


def get_reciprocal(x, x_integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLM's GetReciprocal: (1 / x scaled into Q0.31, num_bits_over_unit) for x > 0."""
    x = _i64(x)
    headroom_plus_one = count_leading_zeros_u32(x)
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted = ((x & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF
    shifted_sum_minus_one = wrap_int32(shifted - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one), num_bits_over_unit
