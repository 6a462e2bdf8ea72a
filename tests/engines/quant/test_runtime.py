"""The runtime models run each scheme's stored codes and give the fake-quantized model's
logits (fp32 summation order aside); what each linear ran on is reported."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.quant.awq import awq_model
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.model_quant import QuantizedModel, quantize_model
from inferlab.engines.quant.runtime import (
    DEQUANTIZED,
    FP8_KERNEL,
    INT4_KERNEL,
    INT8_KERNEL,
    decode_tokens_per_s,
    runtime_model,
)
from tests.engines.quant.helpers import sampled_text

IDS = torch.tensor(list(b"Low-bit decoding reads the codes, not fp32 weights."))
N_LINEARS = 8  # the tiny model: 2 layers x (qkv, o, gate_up, down)


@pytest.fixture(scope="module")
def model():
    return tiny_model()[0]


def _close(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("scheme,kind", [
    ("int8", INT8_KERNEL), ("int8-sym", INT8_KERNEL), ("int4-g128", INT4_KERNEL),
    ("q4_1", INT4_KERNEL), ("q4_0", INT4_KERNEL), ("fp8-e4m3", FP8_KERNEL),
    ("fp8-e5m2", DEQUANTIZED), ("q8_0", INT8_KERNEL),
])
def test_runtime_logits_equal_the_fake_quantized_models(model, scheme, kind):
    qm = quantize_model(model, scheme)
    rt = runtime_model(qm)
    assert rt.kinds == {kind: N_LINEARS}
    assert _close(rt.model.forward_nocache(IDS, all_logits=True),
                  qm.model.forward_nocache(IDS, all_logits=True)) < 1e-5


def test_awq_runs_its_codes_with_the_input_scales(model):
    qm = awq_model(model, sampled_text(model, seed=1, n=2, length=64), bits=4, group_size=64)
    rt = runtime_model(qm)
    assert rt.kinds == {INT4_KERNEL: N_LINEARS}
    assert rt.runs_as == "8 on int4 kernel"
    assert _close(rt.model.forward_nocache(IDS, all_logits=True),
                  qm.model.forward_nocache(IDS, all_logits=True)) < 1e-5


def test_runtime_model_generates_what_the_fake_quantized_model_does(model):
    qm = quantize_model(model, "int8")
    prompt = list(b"The clock")
    want = generate(qm.model, [prompt], max_new_tokens=12).generations[0].token_ids
    got = generate(runtime_model(qm).model, [prompt], max_new_tokens=12)
    assert got.generations[0].token_ids == want
    assert decode_tokens_per_s(runtime_model(qm).model, prompt, new_tokens=4) > 0


def test_weight_bytes_are_the_codes(model):
    qm = quantize_model(model, "int8-sym")
    rt = runtime_model(qm)
    fp32 = sum(4 * lw.qkv.weight.numel() for lw in model.layers)
    int8 = sum(lw.qkv.nbytes for lw in rt.model.layers)
    assert int8 < fp32 / 3.5  # one byte per weight plus a scale per row


def test_a_model_without_records_is_refused(model):
    qm = quantize_model(model, "int8")
    bare = QuantizedModel(qm.scheme, qm.model, qm.linears, qm.weight_bytes, qm.quantize_s)
    with pytest.raises(QuantError, match="keeps no quantized records"):
        runtime_model(bare)
