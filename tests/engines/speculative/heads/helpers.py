"""The tiny model's training data for the head tests: its own greedy answers (byte tokens)."""

from __future__ import annotations

from inferlab.engines.speculative.heads.features import build_sequences

TRAIN_PROMPTS = ("The ferry", "A lamp in the", "Bread and", "Keep the tide", "Over the hill",
                 "Letters from")
HELD_PROMPTS = ("Notes on a bee", "The canal at")
NEW_TOKENS = 48


def tiny_sequences(model, tok, prompts=TRAIN_PROMPTS, texts=None):
    return build_sequences(model, tok, prompts, texts or {}, NEW_TOKENS, 256)
