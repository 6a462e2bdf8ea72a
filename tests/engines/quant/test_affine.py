"""INT8 affine and symmetric quantization against torch's own quantize ops, bit for bit."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.quant import (
    affine_params,
    quantize_affine,
    quantize_uniform,
    symmetric_params,
    value_range,
)
from tests.engines.quant.nasty import nasty, near


def torch_per_tensor(x, scale, zero_point):
    with warnings.catch_warnings():  # torch 2.13 deprecates its quantized dtypes
        warnings.simplefilter("ignore")
        qt = torch.quantize_per_tensor(x, float(scale), int(zero_point), torch.qint8)
        return qt.int_repr(), qt.dequantize()


def torch_per_channel(x, scales, zero_points, axis):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qt = torch.quantize_per_channel(x, scales.double(), zero_points, axis, torch.qint8)
        return qt.int_repr(), qt.dequantize()


def with_ties(x: torch.Tensor, scale: torch.Tensor, zero_point: int, seed: int) -> torch.Tensor:
    """x plus values on, and one ulp either side of, (k + ½)·S and the clamp edges."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.randint(-140, 140, (400,), generator=gen).float()
    ties = (k + 0.5) * scale
    edges = torch.tensor([-128.5, -128.0, -127.5, 127.0, 127.5, 128.0, 300.0, -300.0]) * scale
    edges = edges - zero_point * scale
    return torch.cat([x.flatten(), near(ties), near(edges)])


# ---- the seed's formulas, worked by hand ----------------------------------------------------


def test_hand_worked_affine_six_elements():
    # α = -65/64, β = 190/64: S = (β - α) / 255 = (255/64) / 255 = 1/64 exactly, and
    # Z = round(-α / S) + q_min = round(65) - 128 = -63.
    # x / S        = [-65,  0,    12.8,  64.5, 190, 320]
    # x / S + Z    = [-128, -63, -50.2,   1.5, 127, 257]
    # q (half-even, clamped) = [-128, -63, -50, 2, 127, 127]
    # The tie 64.5 lands on 2: torch rounds x/S + Z, not round(x/S) + Z (= 64 - 63 = 1).
    # x̂ = S (q - Z) = [-65, 0, 13, 65, 190, 190] / 64.
    x = torch.tensor([-1.015625, 0.0, 0.2, 1.0078125, 2.96875, 5.0])
    scale, zero_point = affine_params(torch.tensor(-1.015625), torch.tensor(2.96875))
    assert float(scale) == 0.015625
    assert int(zero_point) == -63
    qx = quantize_affine(x, scale, zero_point)
    assert qx.q.tolist() == [-128, -63, -50, 2, 127, 127]
    assert qx.dequantize().tolist() == [-1.015625, 0.0, 0.203125, 1.015625, 2.96875, 2.96875]
    q_torch, x_hat_torch = torch_per_tensor(x, scale, zero_point)
    assert q_torch.tolist() == qx.q.tolist()
    assert torch.equal(x_hat_torch, qx.dequantize())


def test_hand_worked_symmetric_six_elements():
    # max|x| = 127/64: S = max|x| / 127 = 1/64, Z = 0.
    # x / S = [-127, -32, 0, 12.8, 32.5, 127] -> q = [-127, -32, 0, 13, 32, 127] (32.5 -> 32).
    x = torch.tensor([-1.984375, -0.5, 0.0, 0.2, 0.5078125, 1.984375])
    qx = quantize_uniform(x, symmetric=True)
    assert float(qx.scale) == 0.015625 and int(qx.zero_point) == 0
    assert qx.q.tolist() == [-127, -32, 0, 13, 32, 127]
    assert qx.dequantize().tolist() == [-1.984375, -0.5, 0.0, 0.203125, 0.5, 1.984375]


# ---- torch's quantize ops as the reference --------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("symmetric", [False, True])
def test_per_tensor_equals_torch(seed, symmetric):
    x = nasty((4000,), seed, scale=float(torch.rand(1, generator=torch.Generator().manual_seed(seed))) + 0.01)
    # torch's range rule (0 inside) keeps Z within qint8, which torch insists on.
    base = quantize_uniform(x, symmetric=symmetric, include_zero=True)
    x = with_ties(x, base.scale, int(base.zero_point), seed)
    ours = quantize_affine(x, base.scale, base.zero_point)
    q_torch, x_hat_torch = torch_per_tensor(x, base.scale, base.zero_point)
    assert torch.equal(ours.q, q_torch.to(torch.int8))
    assert torch.equal(ours.dequantize(), x_hat_torch)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shape,axis", [((24, 300), 0), ((300, 24), 1), ((5, 6, 70), 1),
                                        ((5, 6, 70), -1), ((3, 1000), 0)])
@pytest.mark.parametrize("symmetric", [False, True])
def test_per_channel_equals_torch(seed, shape, axis, symmetric):
    x = nasty(shape, seed) * torch.linspace(0.05, 3.0, shape[axis]).reshape(
        [-1 if d == axis % len(shape) else 1 for d in range(len(shape))])
    qx = quantize_uniform(x, axis=axis, symmetric=symmetric, include_zero=True)
    q_torch, x_hat_torch = torch_per_channel(x, qx.scale, qx.zero_point, axis % len(shape))
    assert torch.equal(qx.q, q_torch.to(torch.int8))
    assert torch.equal(qx.dequantize(), x_hat_torch)


@pytest.mark.parametrize("zero_point", [-63, 0, 7, 127, -128])
def test_ties_with_odd_and_even_zero_points_equal_torch(zero_point):
    # S a power of two: (k + ½)·S is an exact tie; with Z odd round(x/S + Z) and
    # round(x/S) + Z part ways on every one of them.
    scale = torch.tensor(2.0**-5)
    x = (torch.arange(-300, 300).float() + 0.5) * scale
    ours = quantize_affine(x, scale, torch.tensor(zero_point))
    q_torch, _ = torch_per_tensor(x, scale, zero_point)
    assert torch.equal(ours.q, q_torch.to(torch.int8))
    chan = quantize_affine(x.reshape(2, -1), scale.repeat(2), torch.tensor([zero_point] * 2), axis=0)
    q_torch, _ = torch_per_channel(x.reshape(2, -1), scale.repeat(2), torch.tensor([zero_point] * 2), 0)
    assert torch.equal(chan.q, q_torch.to(torch.int8))


def test_per_tensor_rounds_like_a_fused_multiply_add():
    # Near-ties where x·(1/S) + Z rounded once (FMA) and twice (multiply, then add) differ:
    # torch's per-tensor kernel matches the former, its per-channel kernel the latter.
    gen = torch.Generator().manual_seed(3)
    scale = torch.tensor(0.0371)
    inv = 1.0 / scale
    x = (torch.randint(-120, 120, (200000,), generator=gen).float() + 0.5) * scale
    two_roundings = torch.round(x * inv + 37.0)
    ours = quantize_affine(x, scale, torch.tensor(37)).q
    assert (ours.float() != two_roundings.clamp(-128, 127)).any()  # the case exists
    q_torch, _ = torch_per_tensor(x, scale, 37)
    assert torch.equal(ours, q_torch.to(torch.int8))


def test_range_without_zero_keeps_the_seed_formula():
    # The seed's Z for [1, 2] is round(-1 / S) + q_min = -383: outside int8, which torch
    # refuses; the codes still reconstruct x to within S/2.
    x = torch.linspace(1.0, 2.0, 101)
    qx = quantize_uniform(x)
    assert float(qx.scale) == pytest.approx(1 / 255)
    assert int(qx.zero_point) == -383
    assert (qx.dequantize() - x).abs().max() <= float(qx.scale) / 2 * (1 + 1e-5)
    widened = quantize_uniform(x, include_zero=True)
    assert int(widened.zero_point) == -128 and float(widened.scale) == pytest.approx(2 / 255)


def test_constant_and_zero_tensors_reconstruct():
    for value in (0.0, 3.5, -2.0):
        x = torch.full((10,), value)
        for symmetric in (False, True):
            assert torch.allclose(quantize_uniform(x, symmetric=symmetric).dequantize(), x,
                                  rtol=1e-6, atol=0)


@pytest.mark.parametrize("symmetric", [False, True])
def test_tiny_range_keeps_a_finite_reciprocal_scale(symmetric):
    x = torch.tensor([0.0, 1.1754943508222875e-38, -3e-39])
    w_hat = quantize_uniform(x, symmetric=symmetric).dequantize()
    assert bool(torch.isfinite(w_hat).all())
    assert (w_hat - x).abs().max() <= 2.0**-126


def test_percentile_range_equals_numpy():
    import numpy as np
    x = nasty((16, 999), 5)
    lo, hi = value_range(x, method="percentile", percentile=99.0)
    assert float(lo) == pytest.approx(np.percentile(x.numpy().astype(np.float64), 1.0), rel=1e-6)
    assert float(hi) == pytest.approx(np.percentile(x.numpy().astype(np.float64), 99.0), rel=1e-6)
    lo, hi = value_range(x, axis=0, method="percentile", percentile=99.9)
    ref = np.percentile(x.numpy().astype(np.float64), [0.1, 99.9], axis=1)
    assert np.allclose(lo.numpy(), ref[0], rtol=1e-6) and np.allclose(hi.numpy(), ref[1], rtol=1e-6)
    # A percentile range clips the outliers: a finer step than min/max gives.
    assert float(quantize_uniform(x, method="percentile", percentile=99.0).scale) < float(
        quantize_uniform(x).scale)


def test_symmetric_scale_is_the_seeds_not_torchs():
    # The seed divides by 127; torch's symmetric observers divide by 127.5.
    x = torch.tensor([-3.0, 1.0, 2.54])
    scale, zero_point = symmetric_params(torch.tensor(3.0))
    assert float(scale) == pytest.approx(3.0 / 127) and int(zero_point) == 0
    assert quantize_uniform(x, symmetric=True).q.tolist()[0] == -127


# ---- properties ------------------------------------------------------------------------------

floats = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, width=32)


@settings(max_examples=60, deadline=None)
@given(st.lists(floats, min_size=1, max_size=64), st.booleans(), st.integers(4, 8))
def test_error_inside_the_range_is_at_most_half_a_step(values, symmetric, bits):
    x = torch.tensor(values, dtype=torch.float32)
    qx = quantize_uniform(x, bits=bits, symmetric=symmetric)
    scale = float(qx.scale)
    # S/2 of rounding plus the fp32 rounding of x·(1/S) and of S(q - Z).
    slack = scale / 2 + 4e-7 * (float(x.abs().max()) + scale)
    assert float((qx.dequantize() - x).abs().max()) <= slack


@settings(max_examples=40, deadline=None)
@given(st.lists(floats, min_size=2, max_size=40), st.integers(2, 8))
def test_codes_stay_in_the_integer_range(values, bits):
    x = torch.tensor(values, dtype=torch.float32)
    qx = quantize_uniform(x, bits=bits, method="percentile", percentile=90.0)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    assert int(qx.q.min()) >= low and int(qx.q.max()) <= high
