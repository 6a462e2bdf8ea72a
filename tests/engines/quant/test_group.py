"""Group-wise INT-b: codes, scales and the reconstruction bound, for g = 32, 64, 128."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import quantize
from hypothesis import example, given, settings
from hypothesis import strategies as st

from inferlab.engines.quant import quantize_groups, unpack_int4
from tests.engines.quant.nasty import nasty


def test_hand_worked_asymmetric_group():
    # One group of 4, 2 bits: m = -1, d = (2 - (-1)) / 3 = 1; q = round(x - m).
    gq = quantize_groups(torch.tensor([-1.0, 0.0, 0.5, 2.0]), bits=2, group_size=4)
    assert gq.q.tolist() == [0, 1, 2, 3]  # 1.5 is a tie: half to even gives 2
    assert gq.scales.tolist() == [1.0] and gq.mins.tolist() == [-1.0]
    assert gq.dequantize().tolist() == [-1.0, 0.0, 1.0, 2.0]


@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("bits", [4, 8])
def test_each_group_has_its_own_scale(group_size, symmetric, bits):
    x = nasty((6, 256), group_size + bits) * torch.linspace(0.01, 5, 256)
    gq = quantize_groups(x, bits=bits, group_size=group_size, symmetric=symmetric)
    groups = x.reshape(6, -1, group_size)
    if symmetric:
        assert torch.equal(gq.scales, groups.abs().amax(-1) / ((1 << (bits - 1)) - 1))
    else:
        assert torch.equal(gq.mins, groups.amin(-1))
        assert torch.equal(gq.scales, (groups.amax(-1) - groups.amin(-1)) / ((1 << bits) - 1))
    step = gq.scales.repeat_interleave(group_size, dim=-1)
    assert bool(((gq.dequantize() - x).abs() <= step / 2 * (1 + 1e-5) + 1e-30).all())


def test_symmetric_int8_with_fp16_scales_is_q8_0():
    # Q8_0 is this quantizer at 8 bits, g = 32, fp16 scales and ties away from zero.
    x = nasty((8, 128), 4)
    gq = quantize_groups(x, bits=8, group_size=32, symmetric=True, scale_dtype=torch.float16,
                         rounding="half_away")
    ref = quantize(x.numpy(), GGMLQuantizationType.Q8_0).reshape(8, 4, 34)
    assert np.array_equal(gq.q.reshape(8, 4, 32).numpy(), ref[..., 2:].view(np.int8))
    assert np.array_equal(gq.scales.numpy(), ref[..., :2].copy().view(np.float16)[..., 0])


def test_int4_codes_pack_losslessly():
    gq = quantize_groups(torch.randn(4, 128), bits=4, group_size=128)
    assert gq.nbytes == 4 * 128 // 2 + 4 * 8
    assert torch.equal(unpack_int4(gq.packed_codes()).to(torch.uint8), gq.q)
    sym = quantize_groups(torch.randn(4, 128), bits=4, group_size=64, symmetric=True)
    assert torch.equal(unpack_int4(sym.packed_codes(), signed=True), sym.q)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, width=32), min_size=32, max_size=32),
       st.booleans(), st.integers(2, 8), st.sampled_from([8, 16, 32]))
# a group whose span is one subnormal (found by hypothesis): its step underflowed to 0
@example([0.0] * 31 + [1.401298464324817e-45], False, 2, 8)
@example([0.0] * 31 + [1.401298464324817e-45], True, 8, 8)
def test_error_is_at_most_half_a_step(values, symmetric, bits, group_size):
    x = torch.tensor(values).reshape(-1, 32)
    gq = quantize_groups(x, bits=bits, group_size=group_size, symmetric=symmetric)
    step = gq.scales.repeat_interleave(group_size, dim=-1)
    slack = 1e-6 * (x.abs().max() + step)  # fp32 rounding of (x - m)/d and of d q + m
    assert bool(((gq.dequantize() - x).abs() <= step / 2 + slack).all())
