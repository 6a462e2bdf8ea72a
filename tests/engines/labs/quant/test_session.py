"""The quant lab's session on any model: a Mixture-of-Experts model refused by name, the
held-out text tokenized with the BOS its tokenizer adds (once), and llama.cpp's chunks
starting with it."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.quant import session as quant_session
from inferlab.engines.labs.quant.session import QuantSession
from inferlab.engines.model.perplexity import LLAMA_CPP
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.quant.errors import QuantError

TEXT = "A clock counts the swings of a pendulum. " * 3


def test_a_mixture_of_experts_model_is_refused_by_name():
    with pytest.raises(QuantError, match=r"^the quantization lab: tiny-moe's layers 0-1 are "
                                         r"Mixture-of-Experts blocks \(8 experts, top-2\)"):
        QuantSession.open("tiny-moe", eval_text=TEXT)


def test_a_tokenizer_that_adds_bos_starts_each_text_with_it_once(monkeypatch):
    """As Gemma 3's does (BOS 2): `encode` adds it, the session must not add another; the
    fp32 model is asked for (a GGUF's codes dequantized)."""
    model, tok = tiny_model()
    tok.bos_token_id, tok.add_bos = 1, True
    asked = {}

    def load(spec, device="cpu", **kw):
        asked.update(kw)
        return model, tok

    monkeypatch.setattr(quant_session, "load_lab_model", load)
    session = QuantSession.open("bos", eval_text=TEXT)
    assert asked["weights"] == "fp32"
    ids = session.eval_sets["eval"]
    assert ids[:2] == [1, ord("A")] and ids.count(1) == 1 + TEXT.encode().count(1)
    session.set_perplexity(16, None, LLAMA_CPP)
    assert session.ppl()["bos_id"] == 1  # each llama.cpp chunk's first token
    assert session.source_note == ""  # not read from a GGUF file
