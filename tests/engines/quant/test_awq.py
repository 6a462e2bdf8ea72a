"""AWQ: beats round-to-nearest where a few input channels carry outlier activations."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.quant import QuantError, quantize_groups
from inferlab.engines.quant.awq import awq_model, awq_quantize, awq_scales, clip_search
from inferlab.engines.quant.layerwise import LinearInputs
from inferlab.engines.quant.model_quant import quantize_model
from tests.engines.quant.helpers import mean_perplexity, sampled_text

D_IN, D_OUT = 256, 64


@pytest.fixture(scope="module")
def layer():
    """Eight input channels 20x larger than the rest (the outliers AWQ protects)."""
    gen = torch.Generator().manual_seed(0)
    scale = torch.ones(D_IN)
    scale[torch.randperm(D_IN, generator=gen)[:8]] = 20.0
    w = torch.randn(D_OUT, D_IN, generator=gen) / D_IN**0.5
    inputs = LinearInputs.empty(D_IN)
    inputs.add(torch.randn(2048, D_IN, generator=gen) * scale, keep_rows=True)
    return w, inputs, torch.randn(2048, D_IN, generator=gen) * scale


def output_error(x, w, w_hat):
    return float(((x @ (w - w_hat).t()) ** 2).mean())


@pytest.mark.parametrize("bits,group_size", [(4, 128), (3, 64), (4, 96)])
def test_awq_beats_rtn_on_held_out_inputs(layer, bits, group_size):
    w, inputs, x_test = layer
    rtn = quantize_groups(w, bits, group_size, ragged=True).dequantize()
    scaled_only = awq_quantize(w, inputs, bits, group_size, clip=False)
    full = awq_quantize(w, inputs, bits, group_size)
    assert 0 < scaled_only.alpha < 1
    assert output_error(x_test, w, scaled_only.dequantize()) < 0.5 * output_error(x_test, w, rtn)
    assert output_error(x_test, w, full.dequantize()) <= output_error(
        x_test, w, scaled_only.dequantize()) * 1.02


def test_alpha_zero_is_rtn(layer):
    w, inputs, _ = layer
    a = awq_quantize(w, inputs, 4, 128, grid=1, clip=False)  # the grid is {0}: s = 1
    assert a.alpha == 0 and torch.equal(a.input_scales, torch.ones(D_IN))
    assert torch.equal(a.dequantize(), quantize_groups(w, 4, 128).dequantize())


def test_the_scales_fold_into_the_inputs(layer):
    w, inputs, x_test = layer
    a = awq_quantize(w, inputs, 4, 128)
    # x Ŵᵀ = (x / s) Q(W diag(s))ᵀ: what a model with 1/s folded into the norm computes.
    torch.testing.assert_close(x_test @ a.dequantize().t(),
                               (x_test / a.input_scales) @ a.codes.dequantize().t(),
                               rtol=1e-5, atol=1e-4)
    assert a.nbytes == a.codes.nbytes + 4 * D_IN


def test_scales_follow_the_formula():
    m = torch.tensor([0.5, 2.0, 8.0])
    s = awq_scales(m, 0.5)
    raw = m**0.5
    torch.testing.assert_close(s, raw / torch.sqrt(raw.max() * raw.min()))
    assert torch.equal(awq_scales(m, 0.0), torch.ones(3))


def test_clipping_keeps_the_range_when_clipping_only_hurts():
    # Two-level groups are exact at full range: any clip adds error, so r stays 1.
    w = torch.tensor([[1.0, -1.0, 1.0, -1.0], [0.5, 0.5, -0.5, -0.5]])
    assert torch.equal(clip_search(w, torch.eye(4), bits=4, group_size=2, symmetric=False),
                       torch.ones(2, 2))


def test_awq_lowers_the_tiny_models_perplexity_against_rtn():
    model, _ = tiny_model()
    calibration = sampled_text(model, seed=1, n=8, length=128)
    held_out = sampled_text(model, seed=2, n=4, length=256)
    fp32 = mean_perplexity(model, held_out)
    rtn = mean_perplexity(quantize_model(
        model, partial(quantize_groups, bits=3, group_size=32)).model, held_out)
    qm = awq_model(model, calibration, bits=3, group_size=32)
    assert fp32 < mean_perplexity(qm.model, held_out) < rtn
    assert qm.scheme == "awq-int3-g32"


@pytest.mark.parametrize("call,message", [
    (lambda w, i: awq_quantize(w, i, group_size=0), "group_size must be a positive integer"),
    (lambda w, i: awq_quantize(w, i, grid=0), "grid must be a positive integer"),
    (lambda w, i: awq_quantize(w, LinearInputs.empty(D_IN)), "calibration is empty"),
    (lambda w, i: awq_quantize(w[:, :8], i), "inputs have 256 channels"),
    (lambda w, i: awq_quantize(w * torch.nan, i), "weight holds"),
])
def test_bad_input_names_the_parameter(layer, call, message):
    w, inputs, _ = layer
    with pytest.raises(QuantError, match=message):
        call(w, inputs)
