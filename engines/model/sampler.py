"""Choosing the next token from logits: greedy, or temperature with nucleus (top-p), seeded.

Nucleus sampling keeps the smallest set of most likely tokens whose probabilities sum to at
least top_p, renormalises, and draws from it. A given seed gives the same draws every run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 means greedy (argmax; top_p and seed are then unused)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


GREEDY = SamplingParams()


class Sampler:
    """Draws next tokens for a batch of logits rows; owns the seeded generator."""

    def __init__(self, params: SamplingParams = GREEDY) -> None:
        self.params = params
        self.generator = torch.Generator().manual_seed(params.seed)

    def __call__(self, logits: torch.Tensor) -> list[int]:
        """One token id per row of `logits` [n, vocab]."""
        p = self.params
        if p.greedy:
            return logits.argmax(dim=-1).tolist()
        probs = torch.softmax(logits.float().cpu() / p.temperature, dim=-1)
        if p.top_p < 1:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            before = sorted_p.cumsum(dim=-1) - sorted_p  # mass of strictly more likely tokens
            sorted_p = sorted_p.masked_fill(before >= p.top_p, 0.0)
            probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).tolist()
