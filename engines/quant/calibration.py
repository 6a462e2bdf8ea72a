"""The texts GPTQ, AWQ and Wanda calibrate on, and the different ones quantized models are
scored on.

All are English written for this project (assets/text/SOURCES.md), shipped, so nothing is
downloaded. The CALIBRATION set is every file in assets/text/calibration/ (16 texts of many
kinds: essays, a story, a play, letters, a radio interview, chat exchanges, how-to guides,
notices, technical guides and references with code, SQL and config; 35,220 SmolLM2 tokens),
as GPTQ and AWQ users calibrate on a varied web corpus rather than one document. The
HELD-OUT texts are three others of different kinds on subjects the calibration set does
not cover: `clocks.txt` (prose), `kiln.txt` (dialogue), `backups.txt` (technical). Scoring
on calibration text would reward over-fitting to it, so perplexity is always measured on
these.

Each calibration text is tokenized on its own and cut into sequences of `CHUNK_TOKENS`
(the last one of a text shorter): no sequence runs from one text into the next.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping, Sequence

from inferlab.engines.quant.errors import QuantError

CALIBRATION_DIR = "calibration"
EVAL_TEXTS = {"prose": "clocks.txt", "dialogue": "kiln.txt", "technical": "backups.txt"}
"""Held-out text name -> its file in assets/text."""
EVAL_TEXT = EVAL_TEXTS["prose"]
CHUNK_TOKENS = 512
"""Tokens per calibration sequence (each starts at position 0, as the model saw in training)."""


def _texts_dir():
    return importlib.resources.files("inferlab.assets") / "text"


def asset_text(name: str) -> str:
    """A text from assets/text."""
    return (_texts_dir() / name).read_text(encoding="utf-8")


def calibration_texts() -> dict[str, str]:
    """The shipped calibration set: file name -> text, in name order."""
    folder = _texts_dir() / CALIBRATION_DIR
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".txt"))
    return {n: (folder / n).read_text(encoding="utf-8") for n in names}


def calibration_text() -> str:
    """The calibration set as one text (its texts in name order, a blank line between)."""
    return "\n\n".join(calibration_texts().values())


def eval_texts() -> dict[str, str]:
    """The shipped held-out texts: kind -> text."""
    return {kind: asset_text(name) for kind, name in EVAL_TEXTS.items()}


def eval_text() -> str:
    """The held-out prose passage (clocks.txt)."""
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


def calibration_chunks(tokenizer, texts: str | Sequence[str] | Mapping[str, str] | None = None,
                       chunk_tokens: int = CHUNK_TOKENS) -> tuple[tuple[int, ...], ...]:
    """The calibration texts (default the shipped set; one string is one text; a mapping's
    values are the texts) each tokenized and cut into sequences. Their lengths add up to
    the texts' token counts exactly."""
    if texts is None:
        texts = calibration_texts()
    if isinstance(texts, str):
        texts = [texts]
    elif isinstance(texts, Mapping):
        texts = list(texts.values())
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise QuantError("calibration text is empty")
    return tuple(c for t in texts for c in token_chunks(tokenizer.encode(t), chunk_tokens))
