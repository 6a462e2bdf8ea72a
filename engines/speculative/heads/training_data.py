"""Every prompt and text a draft head is trained on, listed here and nowhere else.

A head learns from the target's own outputs (self-distillation, as Medusa-2 and EAGLE's
authors recommend when the original training data is not at hand):

    TRAIN_PROMPTS    everyday chat requests (assets/text/prompts.txt, minus those below),
                     then prompt_bank's templated ones: requests on everyday subjects, and
                     requests about each paragraph of the shipped texts (PARAGRAPH_TEXTS and
                     the calibration texts but ferry.txt); each is run through the chat
                     template and continued greedily by the target (heads/distill.py, in
                     one batch); the prompt and its answer are one training sequence
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
from inferlab.engines.speculative.heads.prompt_bank import paragraph_prompts, topic_prompts

PROMPTS_FILE = "prompts.txt"
EXCLUDED_PROMPTS = (
    "Why is the sky blue?",  # the bench's open prompt "Explain to a ten-year-old why the sky is blue"
    "Plan a rainy Sunday afternoon for two adults who like puzzles and cooking.",  # "Plan a rainy Sunday"
)
HELD_OUT_COUNT = 4
PARAGRAPH_TEXTS = ("backups.txt", "clocks.txt", "kiln.txt", "lighthouse.txt")
"""Shipped texts (assets/text) whose paragraphs are asked about, beside the calibration
texts."""
NOT_ASKED_ABOUT = ("ferry.txt",)
"""Calibration texts whose paragraphs are not asked about: a bench prompt's subject."""


def _chat_prompts() -> tuple[str, ...]:
    raw = (importlib.resources.files("inferlab.assets") / "text" / PROMPTS_FILE).read_text(
        encoding="utf-8")
    lines = (line.strip() for line in raw.splitlines())
    return tuple(p for p in lines if p and p not in EXCLUDED_PROMPTS)


def chat_train_prompts() -> tuple[str, ...]:
    """prompts.txt's prompts trained on (all but the excluded and held-out ones)."""
    return _chat_prompts()[:-HELD_OUT_COUNT]


def paragraph_sources() -> dict[str, str]:
    """The texts whose paragraphs prompt_bank asks about (name -> text)."""
    folder = importlib.resources.files("inferlab.assets") / "text"
    texts = {n: t for n, t in calibration_texts().items() if n not in NOT_ASKED_ABOUT}
    texts.update({n: (folder / n).read_text(encoding="utf-8") for n in PARAGRAPH_TEXTS})
    return texts


def train_prompts() -> tuple[str, ...]:
    """Every prompt whose greedy answer a head is trained on: the chat prompts, then the
    templated ones."""
    return (chat_train_prompts() + topic_prompts()
            + paragraph_prompts(paragraph_sources()))


def held_out_prompts() -> tuple[str, ...]:
    """The chat prompts kept out of training: the acceptance curve's."""
    return _chat_prompts()[-HELD_OUT_COUNT:]


def train_texts() -> dict[str, str]:
    """The texts read as they are (name -> text), in file order."""
    return dict(calibration_texts())
