"""The sampling settings speculative decoding applies to BOTH the target and the draft, and the
filtered, normalised distribution they define.

Exactness needs the draft tokens drawn from the same filtered q the verifier is given, and the
verifier's p filtered the same way plain decoding would filter it: then speculative output is
distributed exactly as plain sampling with these settings.

    probs = softmax(logits / temperature)
    top-k: keep the k most likely tokens (ties broken by position), renormalise
    top-p: keep the smallest most-likely-first set whose mass reaches top_p, renormalise

The temperature and top-p rules are those of `engines/model/sampler.Sampler` (the same
tiny-temperature fallback, the same top-p boundary: a token is dropped when the tokens more
likely than it already hold top_p). That sampler has no function returning the filtered
distribution, so it is computed here; tests check both agree draw for draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from inferlab.engines.speculative.errors import SpeculativeError


@dataclass(frozen=True)
class SamplingSettings:
    """temperature 0 means greedy (argmax; top_k and top_p are then unused). top_k 0: no top-k."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise SpeculativeError(f"{name} must be a number, got {value!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise SpeculativeError(
                f"temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise SpeculativeError(f"top_p must be in (0, 1], got {self.top_p}")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise SpeculativeError(f"top_k must be an integer >= 0, got {self.top_k!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


GREEDY = SamplingSettings(temperature=0.0)


def filtered_probs(logits: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """The distribution to sample from, per row of `logits` [..., V]: float32, rows sum to 1.

    Greedy settings give the one-hot row of the argmax (the limit of temperature -> 0).
    """
    bad = torch.isnan(logits) | torch.isposinf(logits)
    if bool(bad.any()):
        raise SpeculativeError("logits hold NaN or +inf: the model's numbers are broken")
    x = logits.float().cpu()
    if settings.greedy:
        return torch.zeros_like(x).scatter_(-1, x.argmax(dim=-1, keepdim=True), 1.0)
    probs = torch.softmax(x / settings.temperature, dim=-1)
    if not bool(torch.isfinite(probs).all()):  # x / T overflowed: a tiny temperature
        xd = x.double()
        probs = torch.softmax((xd - xd.max(dim=-1, keepdim=True).values) / settings.temperature,
                              dim=-1).float()
    if not bool(torch.isfinite(probs).all()):
        raise SpeculativeError("logits: a row is -inf for every token, nothing to sample from")
    vocab = probs.shape[-1]
    if 0 < settings.top_k < vocab:
        # stable sort: among equal probabilities the lower token id is kept, every run alike
        order = probs.sort(dim=-1, descending=True, stable=True).indices
        drop = order[..., settings.top_k:]
        probs = probs.scatter(-1, drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if settings.top_p < 1:
        sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
        before = sorted_p.cumsum(dim=-1) - sorted_p  # mass of strictly more likely tokens
        sorted_p = sorted_p.masked_fill(before >= settings.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs
