"""The texts GPTQ and AWQ calibrate on, and the different one quantized models are scored on.

Both are English essays written for this project (assets/text/SOURCES.md): `bread.txt`
(bread-making, ~3,000 SmolLM2 tokens) is the calibration text, `clocks.txt` (the history of
clocks, ~2,200 tokens) the held-out passage. Scoring on the calibration text would reward
over-fitting to it, so perplexity is always measured on the other one.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence

from inferlab.engines.quant.errors import QuantError

CALIBRATION_TEXT = "bread.txt"
EVAL_TEXT = "clocks.txt"
CHUNK_TOKENS = 512
"""Tokens per calibration sequence (each starts at position 0, as the model saw in training)."""


def asset_text(name: str) -> str:
    """A text from assets/text."""
    return (importlib.resources.files("inferlab.assets") / "text" / name).read_text(
        encoding="utf-8")


def calibration_text() -> str:
    return asset_text(CALIBRATION_TEXT)


def eval_text() -> str:
    return asset_text(EVAL_TEXT)


def token_chunks(token_ids: Sequence[int], chunk_tokens: int = CHUNK_TOKENS
                 ) -> tuple[tuple[int, ...], ...]:
    """`token_ids` cut into consecutive sequences of `chunk_tokens` (the last one shorter);
    a QuantError if there are none."""
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
        raise QuantError(f"chunk_tokens must be a positive integer, got {chunk_tokens!r}")
    ids = [int(t) for t in token_ids]
    if not ids:
        raise QuantError("calibration is empty: no tokens to calibrate on")
    return tuple(tuple(ids[i: i + chunk_tokens]) for i in range(0, len(ids), chunk_tokens))


def calibration_chunks(tokenizer, text: str | None = None, chunk_tokens: int = CHUNK_TOKENS
                       ) -> tuple[tuple[int, ...], ...]:
    """The calibration text (default the shipped one) tokenized and cut into sequences."""
    text = calibration_text() if text is None else text
    if not text.strip():
        raise QuantError("calibration text is empty")
    return token_chunks(tokenizer.encode(text), chunk_tokens)
