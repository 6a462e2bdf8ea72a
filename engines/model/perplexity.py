"""Perplexity of a model on a text: exp of the mean negative log-likelihood per token.

    ppl = exp( -1/N · Σ_{t=1..N} log p(x_t | x_<t) )

over the N = len(ids) - 1 tokens that have a left context. Texts longer than `window` tokens
are scored in consecutive windows (each window's first token is context only), so memory stays
bounded. `passage_text()` is the fixed English passage shipped in assets/text.
"""

from __future__ import annotations

import importlib.resources
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inferlab.engines.model.llama import Llama

PASSAGE = "lighthouse.txt"


def passage_text(name: str = PASSAGE) -> str:
    """A text from assets/text (see assets/text/SOURCES.md)."""
    return (importlib.resources.files("inferlab.assets") / "text" / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class PerplexityResult:
    n_tokens: int
    """Tokens scored."""
    mean_nll: float
    """Mean negative log-likelihood per scored token, in nats."""

    @property
    def perplexity(self) -> float:
        return math.exp(self.mean_nll)

    def to_dict(self) -> dict:
        return {"n_tokens": self.n_tokens, "mean_nll": self.mean_nll,
                "perplexity": self.perplexity}


def perplexity(model: Llama, token_ids: Sequence[int], window: int = 1024,
               paged: bool = False) -> PerplexityResult:
    """Score `token_ids` (at least 2) with full-recompute forwards of at most `window` tokens.

    `paged`: each window runs as one prefill through the model's own paged KV cache
    (`model.new_cache`), whose attention reads K/V back from the cache: what a quantized
    cache (`engines.quant.kv_quant`) stores is what every token attends to, as in decoding."""
    ids = list(token_ids)
    if len(ids) < 2:
        raise ValueError("perplexity needs at least 2 tokens")
    window = max(2, min(window, model.config.max_position))
    total, count = 0.0, 0
    start = 0
    while start < len(ids) - 1:
        chunk = torch.tensor(ids[start: start + window])
        logits = _paged_logits(model, chunk) if paged else \
            model.forward_nocache(chunk, all_logits=True)
        nll = torch.nn.functional.cross_entropy(logits[:-1], chunk[1:].to(logits.device),
                                                reduction="sum")
        total += float(nll)
        count += len(chunk) - 1
        start += window - 1
    return PerplexityResult(count, total / count)


def _paged_logits(model: Llama, chunk: torch.Tensor) -> torch.Tensor:
    from inferlab.engines.model.runner import ModelRunner

    block_size = 16
    runner = ModelRunner(model, n_blocks=-(-len(chunk) // block_size) + 1,
                         block_size=block_size, enable_prefix_caching=False)
    runner.add(0, chunk.tolist())
    return runner.step([0], logits="all")
