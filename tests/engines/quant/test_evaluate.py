"""Schemes by name on a whole model, scored on the held-out text."""

from __future__ import annotations

import pytest

from inferlab.engines.model.perplexity import perplexity
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.model.tokenizer import Tokenizer
from inferlab.engines.quant import QuantError
from inferlab.engines.quant.calibration import eval_text
from inferlab.engines.quant.evaluate import (
    CALIBRATED,
    NAMES,
    evaluate_scheme,
    held_out_perplexity,
    quantize_by_name,
)

SHORT = "The clock in the tower rang every hour, and the town kept time by it. " * 4


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


def test_every_cli_name_is_known():
    assert {"int8", "int4-g128", "q4_1", "gptq-int4-g128", "awq-int4-g128"} <= set(NAMES)


def test_held_out_perplexity_is_on_the_eval_text(tiny):
    model, tok = tiny
    text = eval_text()[:600]
    assert held_out_perplexity(model, tok, text) == perplexity(model, tok.encode(text))


@pytest.mark.parametrize("name", CALIBRATED)
def test_calibrated_schemes_by_name(tiny, name):
    model, tok = tiny
    qm = quantize_by_name(model, name, tok, calibration_text=SHORT)
    assert qm.scheme.startswith(name.split("-")[0]) and len(qm.linears) == 8


def test_evaluate_scheme(tiny):
    model, tok = tiny
    r = evaluate_scheme(model, tok, "int8", eval_text_=SHORT)
    fp32 = held_out_perplexity(model, tok, SHORT).perplexity
    assert abs(r.perplexity - fp32) / fp32 < 0.05
    assert r.weight_bytes < model.weight_bytes and set(r.sqnr_db) >= {"layers.0.qkv"}
    assert r.to_dict()["quantize_seconds"] == r.quantize_s


@pytest.mark.parametrize("call,message", [
    (lambda m, t: quantize_by_name(m, "int5", t), "scheme must be one of"),
    (lambda m, t: quantize_by_name(m, "gptq-int4-g128"), "tokenizer is needed"),
    (lambda m, t: quantize_by_name(m, "awq-int4-g128", t, calibration_text=" "),
     "calibration text is empty"),
    (lambda m, t: held_out_perplexity(m, t, ""), "eval text is empty"),
])
def test_bad_input(tiny, call, message):
    with pytest.raises(QuantError, match=message):
        call(*tiny)


def test_byte_tokenizer_is_what_tiny_uses():
    assert isinstance(tiny_model()[1], Tokenizer)
