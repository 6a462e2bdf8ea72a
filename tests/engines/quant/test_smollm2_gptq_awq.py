"""On SmolLM2 (its first layer only, to stay short): ragged INT4-g128 on its 576-wide rows,
and GPTQ / AWQ against RTN on activations of the HELD-OUT text.

Calibrated on the whole shipped calibration set (16 texts, 35k tokens): with ~1,000 tokens,
GPTQ's 1536-wide down projection over-fits its Hessian and loses to RTN on held-out inputs."""

from __future__ import annotations

import copy

import pytest
import torch

from inferlab.engines.quant import quantize_groups
from inferlab.engines.quant.awq import awq_model
from inferlab.engines.quant.calibration import calibration_chunks, eval_text
from inferlab.engines.quant.gptq import gptq_model
from inferlab.engines.quant.layerwise import LinearInputs, run_layer
from inferlab.engines.quant.model_quant import LINEARS, linear_name, quantize_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def short_smollm2(smollm2):
    model, tok = smollm2  # shared: copied, never changed
    short = copy.copy(model)
    short.layers = model.layers[:1]
    calibration = calibration_chunks(tok)
    held_out = torch.tensor(tok.encode(eval_text())[:512])
    return short, calibration, held_out


def held_out_inputs(model, ids):
    """Each linear's input on the held-out text, from the fp model, layer by layer."""
    out, h = {}, model.embed[ids].float()
    for i, lw in enumerate(model.layers):
        stats = {w: LinearInputs.empty(getattr(lw, w).in_features) for w in LINEARS}
        h = run_layer(model, lw, h, stats, keep_rows=True)
        out |= {linear_name(i, w): stats[w].stacked_rows() for w in LINEARS}
    return out


def output_error(x, w, w_hat):
    return float(((x @ (w.float() - w_hat.float()).t()) ** 2).mean())


def test_int4_g128_is_ragged_on_576_wide_rows(short_smollm2):
    model, _, _ = short_smollm2
    qm = quantize_model(model, "int4-g128")
    qkv = qm.report("layers.0.qkv")
    assert qkv.shape == (960, 576)
    assert qkv.nbytes == 960 * 576 // 2 + 960 * 5 * 8  # 5 groups: 4 x 128 + 64
    assert qm.report("layers.0.down").nbytes == 576 * 1536 // 2 + 576 * 12 * 8


@pytest.mark.parametrize("method", ["gptq", "awq"])
def test_calibrated_beats_rtn_on_held_out_activations(short_smollm2, method):
    model, calibration, held_out = short_smollm2
    make = gptq_model if method == "gptq" else awq_model
    qm = make(model, calibration, bits=4, group_size=128)
    inputs = held_out_inputs(model, held_out)
    for w in LINEARS:
        name = linear_name(0, w)
        weight = getattr(model.layers[0], w).weight
        rtn = quantize_groups(weight.float(), 4, 128, ragged=True).dequantize()
        got = getattr(qm.model.layers[0], w).weight
        assert output_error(inputs[name], weight, got) < 0.9 * output_error(inputs[name], weight,
                                                                            rtn), name
