"""Whole-model quantization on the tiny model: every linear replaced, errors and bytes right."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.model.llama import Llama
from inferlab.engines.model.tiny import tiny_config, tiny_model, tiny_state_dict
from inferlab.engines.quant import QuantError, scheme, tensor_error
from inferlab.engines.quant.model_quant import LINEARS, model_linears, quantize_model

HF = {"qkv": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
      "o": ("self_attn.o_proj",), "gate_up": ("mlp.gate_proj", "mlp.up_proj"),
      "down": ("mlp.down_proj",)}


def fp32_bytes(t):
    return t.numel() * 4


@pytest.fixture(scope="module")
def tiny_fp32():
    return tiny_model()[0]


def dequantized_state_dict(config, name):
    """The reference: each HF projection round-tripped on its own (row-wise schemes quantize
    rows independently, so this equals quantizing the fused matrices)."""
    sd = tiny_state_dict(config)
    out = dict(sd)
    for i in range(config.n_layers):
        for parts in HF.values():
            for p in parts:
                key = f"model.layers.{i}.{p}.weight"
                out[key] = scheme(name).round_trip(sd[key])
    return out


@pytest.mark.parametrize("name", ["int8", "int4-g128", "q4_1"])
def test_the_model_equals_one_built_from_dequantized_weights(tiny_fp32, name):
    qm = quantize_model(tiny_fp32, name)
    ref = Llama.from_state_dict(tiny_fp32.config, dequantized_state_dict(tiny_fp32.config, name))
    ids = torch.tensor(list(b"The keeper climbed the stairs."))
    torch.testing.assert_close(qm.model.forward_nocache(ids, all_logits=True),
                               ref.forward_nocache(ids, all_logits=True), rtol=1e-5, atol=1e-4)
    assert qm.scheme == name and len(qm.linears) == 4 * tiny_fp32.config.n_layers


def test_reports_and_bytes_against_the_scheme(tiny_fp32):
    s = scheme("int8")
    qm = quantize_model(tiny_fp32, s)
    expected_bytes = 0
    for (name, lin), rep in zip(model_linears(tiny_fp32), qm.linears, strict=True):
        rec = s.quantize(lin.weight)
        assert rep.name == name and rep.shape == tuple(lin.weight.shape)
        assert rep.error == tensor_error(lin.weight, rec.dequantize())
        assert rep.nbytes == rec.nbytes and rep.source_bytes == fp32_bytes(lin.weight)
        expected_bytes += rec.nbytes
    assert qm.quantized_bytes == expected_bytes
    m = tiny_fp32
    rest = fp32_bytes(m.embed) + fp32_bytes(m.lm_head.weight) + fp32_bytes(m.final_norm) + sum(
        fp32_bytes(lw.attn_norm) + fp32_bytes(lw.mlp_norm) for lw in m.layers)
    assert qm.weight_bytes == expected_bytes + rest
    assert qm.weight_bytes < m.weight_bytes
    assert qm.report("layers.1.down").name == "layers.1.down"
    with pytest.raises(QuantError, match="name must be a quantized linear"):
        qm.report("layers.9.down")


def test_the_source_model_is_unchanged_and_the_rest_is_shared(tiny_fp32):
    before = [getattr(lw, w).weight.clone() for lw in tiny_fp32.layers for w in LINEARS]
    qm = quantize_model(tiny_fp32, "int4-g128")
    after = [getattr(lw, w).weight for lw in tiny_fp32.layers for w in LINEARS]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert qm.model.lm_head is tiny_fp32.lm_head and qm.model.embed is tiny_fp32.embed
    assert qm.model.layers[0].attn_norm is tiny_fp32.layers[0].attn_norm
    assert not torch.equal(qm.model.layers[0].qkv.weight, tiny_fp32.layers[0].qkv.weight)


def test_a_tied_lm_head_quantizes_the_embedding_with_it():
    config = tiny_config(tie_embeddings=True)
    model = Llama.from_state_dict(config, tiny_state_dict(config))
    qm = quantize_model(model, "q8_0", include_lm_head=True)
    w_hat = scheme("q8_0").round_trip(model.lm_head.weight)
    assert torch.equal(qm.model.lm_head.weight, w_hat)
    assert torch.equal(qm.model.embed, w_hat)  # read from the same codes
    assert qm.linears[-1].name == "lm_head"
    norms = fp32_bytes(model.final_norm) + sum(
        fp32_bytes(lw.attn_norm) + fp32_bytes(lw.mlp_norm) for lw in model.layers)
    assert qm.weight_bytes == qm.quantized_bytes + norms  # the embedding counted once


def test_int8_keeps_the_logits_close(tiny_fp32):
    ids = torch.tensor(list(b"A lighthouse does one simple job."))
    ref = tiny_fp32.forward_nocache(ids, all_logits=True)
    got = quantize_model(tiny_fp32, "int8").model.forward_nocache(ids, all_logits=True)
    assert (got.argmax(-1) == ref.argmax(-1)).float().mean() > 0.9
    assert ((got - ref).norm() / ref.norm()) < 0.05


def test_a_bad_scheme_is_an_error(tiny_fp32):
    with pytest.raises(QuantError, match="scheme must be one of"):
        quantize_model(tiny_fp32, "int3")
    with pytest.raises(QuantError, match="scheme must be a scheme name"):
        quantize_model(tiny_fp32, 4)
