"""The calibration set and the held-out texts, and calibration token sequences (counted
exactly)."""

from __future__ import annotations

import pytest

from inferlab.engines.model.perplexity import passage_text
from inferlab.engines.model.tokenizer import Tokenizer
from inferlab.engines.quant import QuantError
from inferlab.engines.quant.calibration import (
    EVAL_TEXTS,
    calibration_chunks,
    calibration_text,
    calibration_texts,
    eval_text,
    eval_texts,
    token_chunks,
)


def _paragraphs(text: str) -> set[str]:
    return {p.strip() for p in text.split("\n\n") if len(p.strip()) > 40}


def test_the_calibration_set_and_the_held_out_texts_share_nothing():
    cal = calibration_texts()
    assert len(cal) >= 12 and "bread.txt" in cal
    held = eval_texts()
    assert set(held) == {"prose", "dialogue", "technical"} == set(EVAL_TEXTS)
    assert held["prose"] == eval_text()
    cal_paragraphs = set().union(*map(_paragraphs, cal.values()))
    for kind, text in held.items():
        assert len(text.split()) > 1500, kind
        assert not cal_paragraphs & _paragraphs(text), kind
    passage = passage_text()  # the model runtime's passage
    assert passage[:200] not in calibration_text() and not cal_paragraphs & _paragraphs(passage)


def test_token_chunks_cut_in_order():
    assert token_chunks(range(7), 3) == ((0, 1, 2), (3, 4, 5), (6,))


def test_each_text_is_chunked_on_its_own_and_every_token_counted():
    byte = Tokenizer.byte_level()
    texts = calibration_texts()
    chunks = calibration_chunks(byte, chunk_tokens=512)
    # byte-level: one token per UTF-8 byte, so the count is the texts' bytes, exactly
    assert sum(map(len, chunks)) == sum(len(t.encode()) for t in texts.values())
    # one chunk per started 512 of each text: none runs from one text into the next
    assert len(chunks) == sum(-(-len(t.encode()) // 512) for t in texts.values())
    assert calibration_chunks(byte, ["abcde", "fg"], 2) == (
        (97, 98), (99, 100), (101,), (102, 103))
    assert calibration_chunks(byte, "abc", 2) == ((97, 98), (99,))


@pytest.mark.slow
def test_the_calibration_set_is_over_32k_smollm2_tokens(smollm2):
    _, tok = smollm2
    per_text = {n: len(tok.encode(t)) for n, t in calibration_texts().items()}
    total = sum(map(len, calibration_chunks(tok)))
    assert total == sum(per_text.values()) == 35_220
    assert total >= 32_000 and min(per_text.values()) > 1500


@pytest.mark.parametrize("call,message", [
    (lambda: token_chunks([], 512), "calibration is empty"),
    (lambda: token_chunks([1, 2], 0), "chunk_tokens must be a positive integer"),
    (lambda: calibration_chunks(Tokenizer.byte_level(), "  \n"), "calibration text is empty"),
    (lambda: calibration_chunks(Tokenizer.byte_level(), []), "calibration text is empty"),
])
def test_bad_calibration_input(call, message):
    with pytest.raises(QuantError, match=message):
        call()
