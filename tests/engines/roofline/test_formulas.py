"""Roofline formulas against hand-computed values."""

import math

import numpy as np
import pytest

from inferlab.engines.roofline.formulas import (
    arithmetic_intensity,
    attainable_flops,
    bound,
    knee_intensity,
    predicted_time_s,
    roofline_curve,
)

# A made-up device with round numbers: 100 TFLOP/s, 2 TB/s → knee at 50 FLOP/byte.
PEAK = 100e12
BW = 2e12


def test_knee_is_peak_over_bandwidth():
    assert knee_intensity(PEAK, BW) == 50.0
    # H100 SXM bf16: 989.4e12 / 3.35e12 = 295.34… FLOP/byte
    assert knee_intensity(989.4e12, 3.35e12) == pytest.approx(295.343, abs=1e-3)


def test_attainable_below_and_above_the_knee():
    assert attainable_flops(PEAK, BW, 10.0) == 20e12  # 10 FLOP/B × 2 TB/s, under the roof
    assert attainable_flops(PEAK, BW, 50.0) == PEAK  # exactly at the knee
    assert attainable_flops(PEAK, BW, 400.0) == PEAK  # flat roof


def test_matmul_2048_cubed_fp32_intensity():
    n = 2048
    flops, bytes_moved = 2 * n**3, 3 * n**2 * 4
    # 2·2048³ / (3·2048²·4) = 2·2048 / 12 = 341.33… FLOP/byte
    assert arithmetic_intensity(flops, bytes_moved) == pytest.approx(4096 / 12)


def test_intensity_of_zero_bytes_is_infinite():
    assert math.isinf(arithmetic_intensity(1.0, 0.0))


def test_predicted_time_takes_the_slower_roof():
    # 1 TFLOP and 1 GB: compute 10 ms, memory 0.5 ms → 10 ms
    assert predicted_time_s(1e12, 1e9, PEAK, BW) == pytest.approx(0.01)
    # 1 GFLOP and 1 GB: compute 10 µs, memory 0.5 ms → 0.5 ms
    assert predicted_time_s(1e9, 1e9, PEAK, BW) == pytest.approx(5e-4)


def test_bound_switches_at_the_knee():
    assert bound(49.0, 1.0, PEAK, BW) == "memory"
    assert bound(50.0, 1.0, PEAK, BW) == "compute"
    assert bound(1e6, 1.0, PEAK, BW) == "compute"


def test_formulas_work_element_wise_on_arrays():
    intensity = np.array([1.0, 50.0, 1000.0])
    np.testing.assert_array_equal(attainable_flops(PEAK, BW, intensity), [2e12, PEAK, PEAK])
    np.testing.assert_array_equal(arithmetic_intensity(np.array([4.0, 8.0]), 2.0), [2.0, 4.0])


def test_roofline_curve_is_log_spaced_and_hits_the_knee_exactly():
    intensity, attainable = roofline_curve(PEAK, BW, n=64)
    assert intensity.shape == attainable.shape == (64,)
    assert intensity[0] == pytest.approx(1 / 16) and intensity[-1] == pytest.approx(4096)
    assert np.all(np.diff(intensity) > 0)
    assert 50.0 in intensity
    np.testing.assert_allclose(attainable, np.minimum(PEAK, intensity * BW))


def test_roofline_curve_rejects_a_bad_range():
    with pytest.raises(ValueError):
        roofline_curve(PEAK, BW, i_min=10, i_max=1)
