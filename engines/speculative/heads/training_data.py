"""Every prompt and text a draft head is trained on, listed here and nowhere else.

A head learns from the target's own outputs (self-distillation, as Medusa-2 and EAGLE's
authors recommend when the original training data is not at hand):

    TRAIN_PROMPTS    everyday chat requests (assets/text/prompts.txt, minus those below):
                     each is run through the chat template and continued greedily by the
                     target; the prompt and its answer are one training sequence
    HELD_OUT_PROMPTS the last HELD_OUT_COUNT of those prompts: continued the same way, never
                     trained on; the acceptance curve is measured on them each epoch
    TRAIN_TEXTS      the quantization lab's calibration texts (assets/text/calibration/,
                     16 texts of many kinds): read by the target as they are, no generation

The speculative lab's bench prompts (assets/text/speculative_prompts.txt: its grounded and
open groups) are NEVER trained on: they are what a head's speedup is measured on. Two
prompts of prompts.txt that ask what a bench prompt asks are left out too
(`EXCLUDED_PROMPTS`), so the bench's open prompts stay unseen in substance as well as in
wording. tests/engines/speculative/heads/test_training_data.py checks both.
"""

from __future__ import annotations

import importlib.resources

from inferlab.engines.quant.calibration import calibration_texts

PROMPTS_FILE = "prompts.txt"
EXCLUDED_PROMPTS = (
    "Why is the sky blue?",  # the bench's open prompt "Explain to a ten-year-old why the sky is blue"
    "Plan a rainy Sunday afternoon for two adults who like puzzles and cooking.",  # "Plan a rainy Sunday"
)
HELD_OUT_COUNT = 4


def _chat_prompts() -> tuple[str, ...]:
    raw = (importlib.resources.files("inferlab.assets") / "text" / PROMPTS_FILE).read_text(
        encoding="utf-8")
    lines = (line.strip() for line in raw.splitlines())
    return tuple(p for p in lines if p and p not in EXCLUDED_PROMPTS)


def train_prompts() -> tuple[str, ...]:
    """The chat prompts whose greedy answers a head is trained on."""
    return _chat_prompts()[:-HELD_OUT_COUNT]


def held_out_prompts() -> tuple[str, ...]:
    """The chat prompts kept out of training: the acceptance curve's."""
    return _chat_prompts()[-HELD_OUT_COUNT:]


def train_texts() -> dict[str, str]:
    """The texts read as they are (name -> text), in file order."""
    return dict(calibration_texts())
