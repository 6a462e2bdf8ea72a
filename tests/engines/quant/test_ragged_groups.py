"""Ragged groups: a row of 576 at g = 128 is four groups of 128 and one of 64, each its own."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.quant import QuantError, quantize_groups, scheme, unpack_int4


@pytest.mark.parametrize("symmetric", [False, True])
def test_each_group_equals_quantizing_it_alone(symmetric):
    x = torch.randn(5, 576, generator=torch.Generator().manual_seed(3))
    x[:, 530] = 9.0  # an outlier in the short group only
    gq = quantize_groups(x, bits=4, group_size=128, symmetric=symmetric, ragged=True)
    assert gq.ragged and gq.q.shape == (5, 576) and gq.scales.shape == (5, 5)
    for k, (lo, hi) in enumerate([(0, 128), (128, 256), (256, 384), (384, 512), (512, 576)]):
        alone = quantize_groups(x[:, lo:hi], bits=4, group_size=hi - lo, symmetric=symmetric)
        assert torch.equal(gq.q[:, lo:hi], alone.q)
        assert torch.equal(gq.scales[:, k], alone.scales[:, 0])
        if not symmetric:
            assert torch.equal(gq.mins[:, k], alone.mins[:, 0])
        assert torch.equal(gq.dequantize()[:, lo:hi], alone.dequantize())


def test_a_dividing_group_size_is_unchanged_by_ragged():
    x = torch.randn(3, 256)
    a = quantize_groups(x, group_size=128)
    b = quantize_groups(x, group_size=128, ragged=True)
    assert not b.ragged
    assert torch.equal(a.q, b.q) and torch.equal(a.scales, b.scales)


def test_a_row_shorter_than_the_group_is_one_group():
    x = torch.randn(2, 64)
    gq = quantize_groups(x, group_size=128, ragged=True)
    assert gq.scales.shape == (2, 1)
    assert torch.equal(gq.q, quantize_groups(x, group_size=64).q)


def test_ragged_bytes_count_each_group_once():
    gq = quantize_groups(torch.randn(4, 576), bits=4, group_size=128, ragged=True)
    # 4 bits per weight, plus an fp32 scale and minimum for each of the 5 groups per row.
    assert gq.nbytes == 4 * 576 // 2 + 4 * 5 * 8
    assert torch.equal(unpack_int4(gq.packed_codes()).to(torch.uint8), gq.q)


def test_int4_g128_scheme_takes_smollm2_rows():
    w = torch.randn(8, 576) * 0.02
    qw = scheme("int4-g128").quantize(w)
    assert qw.scales.shape == (8, 5)
    assert (qw.dequantize() - w).abs().max() <= qw.scales.max() / 2 * (1 + 1e-5)


@pytest.mark.parametrize("group_size", [0, -128, 12.5, True])
def test_a_bad_group_size_is_still_an_error(group_size):
    with pytest.raises(QuantError, match="group_size must be a positive integer"):
        quantize_groups(torch.randn(2, 576), group_size=group_size, ragged=True)


def test_without_ragged_a_non_dividing_group_size_is_an_error():
    with pytest.raises(QuantError, match="group_size 128 does not divide the last axis"):
        quantize_groups(torch.randn(2, 576), group_size=128)
