"""The calibration and held-out texts, and calibration token sequences."""

from __future__ import annotations

import pytest

from inferlab.engines.model.tokenizer import Tokenizer
from inferlab.engines.quant import QuantError
from inferlab.engines.quant.calibration import (
    calibration_chunks,
    calibration_text,
    eval_text,
    token_chunks,
)


def test_the_two_texts_are_long_and_different():
    cal, ev = calibration_text(), eval_text()
    assert len(cal.split()) > 2000 and len(ev.split()) > 1500
    cal_paragraphs = {p.strip() for p in cal.split("\n\n")}
    assert not cal_paragraphs & {p.strip() for p in ev.split("\n\n")}
    # Not the model runtime's passage either.
    assert "lighthouse" not in cal.lower()


def test_token_chunks_cut_in_order():
    assert token_chunks(range(7), 3) == ((0, 1, 2), (3, 4, 5), (6,))
    chunks = calibration_chunks(Tokenizer.byte_level(), chunk_tokens=512)
    assert sum(map(len, chunks)) == len(calibration_text().encode()) and len(chunks[0]) == 512


@pytest.mark.parametrize("call,message", [
    (lambda: token_chunks([], 512), "calibration is empty"),
    (lambda: token_chunks([1, 2], 0), "chunk_tokens must be a positive integer"),
    (lambda: calibration_chunks(Tokenizer.byte_level(), "  \n"), "calibration text is empty"),
])
def test_bad_calibration_input(call, message):
    with pytest.raises(QuantError, match=message):
        call()
