"""FP8 E4M3 / E5M2: our encoder and decoder against torch's float8 casts, bit for bit."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.quant import E4M3, E5M2, decode_fp8, encode_fp8, quantize_fp8
from tests.engines.quant.nasty import SUBNORMALS, nasty, near

FORMATS = [E4M3, E5M2]


def torch_dtype(fmt):
    return getattr(torch, fmt.torch_dtype_name)


def torch_codes(v, fmt):
    return v.to(torch_dtype(fmt)).view(torch.uint8)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_decode_every_code_equals_torch(fmt):
    codes = torch.arange(256, dtype=torch.uint8)
    ref = codes.view(torch_dtype(fmt)).float()
    ours = decode_fp8(codes, fmt)
    assert torch.equal(torch.isnan(ours), torch.isnan(ref))
    assert torch.equal(ours[~torch.isnan(ref)], ref[~torch.isnan(ref)])
    assert float(ours.nan_to_num(0, 0, 0).abs().max()) == fmt.max_value


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_encode_every_value_midpoint_and_neighbour_equals_torch(fmt):
    values = decode_fp8(torch.arange(256, dtype=torch.uint8), fmt)
    values = torch.sort(values[torch.isfinite(values)].unique()).values
    midpoints = (values[1:] + values[:-1]) / 2  # exact ties: round to the even code
    x = torch.cat([near(values), near(midpoints), torch.tensor([0.0, -0.0, *SUBNORMALS])])
    x = x.clamp(-fmt.max_value, fmt.max_value)
    assert torch.equal(encode_fp8(x, fmt), torch_codes(x, fmt))


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("seed", range(3))
def test_quantize_equals_torchs_saturated_cast(fmt, seed):
    x = nasty((50000,), seed, scale=10.0 ** (seed - 1))
    qx = quantize_fp8(x, fmt)
    # The reference: scale by the fp32 reciprocal, saturate, let torch cast.
    scale = x.abs().amax() / fmt.max_value
    ref = torch_codes(torch.clamp(x * (1.0 / scale), -fmt.max_value, fmt.max_value), fmt)
    assert torch.equal(qx.codes, ref)
    assert torch.equal(qx.dequantize(), ref.view(torch_dtype(fmt)).float() * scale)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_saturates_instead_of_overflowing(fmt):
    x = torch.tensor([1.0, -2.0, 3.0])
    big = torch.tensor([fmt.max_value * 4, -fmt.max_value * 1e6, 1.0])
    assert decode_fp8(encode_fp8(big, fmt), fmt).tolist() == [fmt.max_value, -fmt.max_value, 1.0]
    qx = quantize_fp8(x, fmt)
    assert float(qx.dequantize()[2]) == 3.0  # max|x| lands exactly on fp8_max
    assert torch.equal(encode_fp8(torch.tensor([float("nan")]), fmt), torch.tensor([0x7F],
                                                                                  dtype=torch.uint8))


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_tiny_tensor_keeps_a_finite_reciprocal_scale(fmt):
    # max|x| / 448 would be subnormal and its reciprocal inf.
    x = torch.tensor([0.0, 1.1754943508222875e-38, -3e-39])
    w_hat = quantize_fp8(x, fmt).dequantize()
    assert bool(torch.isfinite(w_hat).all()) and w_hat[0] == 0 and w_hat[1] > 0 > w_hat[2]


def test_all_zero_tensor():
    qx = quantize_fp8(torch.zeros(4), "e4m3")
    assert float(qx.scale) == 1.0 and qx.dequantize().tolist() == [0.0] * 4


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=50), st.sampled_from(FORMATS))
def test_relative_error_is_at_most_half_an_ulp(values, fmt):
    x = torch.tensor(values)
    qx = quantize_fp8(x, fmt)
    v = x * (1.0 / qx.scale)
    # Normal range: |v - fp8(v)| ≤ 2^-(m+1) |v|; subnormal range: ≤ half the subnormal step.
    bound = torch.maximum(v.abs() * 2.0 ** -(fmt.mantissa_bits + 1),
                          torch.tensor(2.0 ** (1 - fmt.bias - fmt.mantissa_bits - 1)))
    err = (decode_fp8(qx.codes, fmt) - v).abs()
    assert bool((err <= bound * (1 + 1e-6)).all())
