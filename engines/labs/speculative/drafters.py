"""The drafter a speculative lab setting names (`make_drafter`), built for its target."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import torch

from inferlab.engines.labs.speculative.settings import HEAD_DRAFTERS, parse_drafter
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.quant.calibration import calibration_texts
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.head_drafter import EagleDrafter, MedusaDrafter
from inferlab.engines.speculative.heads.head_file import load_head
from inferlab.engines.speculative.heads.shipped import find_head
from inferlab.engines.speculative.model_drafter import (
    LayerSkipDrafter,
    ModelDrafter,
    SkipDrafter,
    quantized_self_draft,
)
from inferlab.engines.speculative.ngram import NgramDrafter
from inferlab.engines.speculative.skip_search import cached_search

TINY_VOCAB = 256
"""The tiny draft model's vocabulary: its byte-level tokenizer's (tiny and tiny-moe share it)."""
SKIP_AUTO_TEXTS = 4
SKIP_AUTO_TOKENS = 64
"""skip:auto scores agreement on the first SKIP_AUTO_TOKENS tokens of each of the first
SKIP_AUTO_TEXTS shipped calibration texts (several kinds of text over one long one)."""


def skip_auto(model, tokenizer):
    """The `skip:auto` search for `model` (engines.speculative.skip_search), from the user
    cache when this model was searched before."""
    texts = list(calibration_texts().values())[:SKIP_AUTO_TEXTS]
    ids = [torch.tensor(tokenizer.encode(t)[:SKIP_AUTO_TOKENS]) for t in texts]
    return cached_search(model, ids, user_cache())


def user_cache() -> Path:
    return Path(platformdirs.user_cache_dir("inferlab"))


def head_path(model, kind: str) -> Path | None:
    """The `kind` head ("eagle", "medusa") that drafter drafts with for `model` (user cache,
    else shipped), or None."""
    return find_head(model, kind, user_cache())


def make_drafter(spec: str, model, tokenizer, sampling, seed: int, max_tokens: int,
                 device: str = "cpu"):
    """The drafter `spec` names for target `model` (SpeculativeError when it cannot be)."""
    kind, n = parse_drafter(spec)
    if kind == "ngram":
        return NgramDrafter()
    if kind == "layerskip":
        return LayerSkipDrafter(model, n, settings=sampling, seed=seed, tokenizer=tokenizer,
                                max_tokens=max_tokens)
    if kind == "skip":
        skipped = skip_auto(model, tokenizer).best.skipped if n == "auto" else n
        return SkipDrafter(model, skipped, settings=sampling, seed=seed, tokenizer=tokenizer,
                           max_tokens=max_tokens)
    if kind in HEAD_DRAFTERS:
        path = head_path(model, kind)
        if path is None:
            label = "EAGLE head" if kind == "eagle" else "Medusa heads"
            raise SpeculativeError(f"no {label} for {model.config.id}: train one with "
                                   f"`inferlab train-head --kind {kind}`")
        cls = EagleDrafter if kind == "eagle" else MedusaDrafter
        return cls(model, load_head(path, model), settings=sampling, seed=seed,
                   tokenizer=tokenizer, max_tokens=max_tokens)
    if kind == "quant":
        return ModelDrafter(quantized_self_draft(model, n), settings=sampling, seed=seed,
                            tokenizer=tokenizer, max_tokens=max_tokens, name=spec)
    vocab = model.config.vocab_size
    if vocab != TINY_VOCAB:  # refused before the draft is built, naming why
        raise SpeculativeError(
            f"its vocabulary has {TINY_VOCAB} tokens, the target's {vocab:,} "
            f"({model.config.id}'s own tokenizer): the tiny draft model reads bytes, and a "
            "draft model must share the target's tokenizer; for this target use ngram, "
            "layerskip:N, skip:auto or quant:int8")
    draft, draft_tok = tiny_model(seed=1, n_layers=1, device=device, kernels=model.kernel_path)
    return ModelDrafter(draft, settings=sampling, seed=seed, tokenizer=draft_tok,
                        max_tokens=max_tokens, name="tiny")
