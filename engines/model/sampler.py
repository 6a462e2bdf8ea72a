"""Choosing the next token from logits: greedy, or temperature with top-k and nucleus (top-p),
seeded.

`filtered_probs` is the one place the distribution is defined (speculative decoding filters
its target and draft with it too):

    probs = softmax(logits / temperature)
    top-k: keep the k most likely tokens (ties broken by position), renormalise
    top-p: keep the smallest most-likely-first set whose mass reaches top_p, renormalise
           (a token is dropped when the tokens more likely than it already hold top_p)

A given seed gives the same draws every run.
Logits holding NaN or +inf (a broken model or weights) are refused with a ValueError, in
both modes: NaN never reaches `torch.multinomial`, and greedy never returns a NaN's index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 means greedy (argmax; top_k, top_p and seed are then unused); top_k 0
    keeps every token. top_k comes last so that positional (temperature, top_p, seed) keeps
    its meaning."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    top_k: int = 0

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ValueError(f"{name} must be a number, got {value!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0, got {self.top_k!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


GREEDY = SamplingParams()


def check_logits(logits: torch.Tensor) -> None:
    """ValueError if a row of `logits` [n, vocab] holds NaN or +inf. One pass: a row's max
    is NaN if any entry is (amax propagates NaN) and +inf if any entry is."""
    row_max = logits.amax(dim=-1)
    bad = torch.isnan(row_max) | torch.isposinf(row_max)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(f"logits row {row} holds NaN or +inf: the model's numbers are "
                         "broken (check its weights and config), nothing to sample from")


def greedy_tokens(logits: torch.Tensor) -> list[int]:
    """The argmax of every row of `logits` [n, vocab], checked (a batch's greedy rows at once:
    a greedy pick needs no generator)."""
    check_logits(logits)
    return logits.argmax(dim=-1).tolist()


def filtered_probs(logits: torch.Tensor, temperature: float, top_k: int = 0,
                   top_p: float = 1.0) -> torch.Tensor:
    """The distribution to sample from, per row of `logits` [..., V]: fp32 on the CPU, rows
    summing to 1 (the formula in the module docstring). Temperature 0 gives the one-hot row of
    the argmax (its limit). ValueError for NaN / +inf logits or a row that is all -inf."""
    check_logits(logits)
    x = logits.float().cpu()
    if temperature == 0:
        return torch.zeros_like(x).scatter_(-1, x.argmax(dim=-1, keepdim=True), 1.0)
    probs = torch.softmax(x / temperature, dim=-1)
    if not bool(torch.isfinite(probs).all()):  # x / T overflowed: a tiny temperature
        xd = x.double()
        probs = torch.softmax((xd - xd.max(dim=-1, keepdim=True).values) / temperature,
                              dim=-1).float()
    if not bool(torch.isfinite(probs).all()):
        raise ValueError("a logits row is -inf for every token: nothing to sample from")
    if 0 < top_k < probs.shape[-1]:
        # stable sort: among equal probabilities the lower token id is kept, every run alike
        drop = probs.sort(dim=-1, descending=True, stable=True).indices[..., top_k:]
        probs = probs.scatter(-1, drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if top_p < 1:
        sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
        before = sorted_p.cumsum(dim=-1) - sorted_p  # mass of strictly more likely tokens
        sorted_p = sorted_p.masked_fill(before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


class Sampler:
    """Draws next tokens for a batch of logits rows; owns the seeded generator."""

    def __init__(self, params: SamplingParams = GREEDY) -> None:
        self.params = params
        self.generator = torch.Generator().manual_seed(params.seed)

    def __call__(self, logits: torch.Tensor) -> list[int]:
        """One token id per row of `logits` [n, vocab]."""
        p = self.params
        if p.greedy:
            return greedy_tokens(logits)
        probs = filtered_probs(logits, p.temperature, p.top_k, p.top_p)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).tolist()
