"""The sampling settings speculative decoding applies to BOTH the target and the draft, and the
filtered, normalised distribution they define.

Exactness needs the draft tokens drawn from the same filtered q the verifier is given, and the
verifier's p filtered the same way plain decoding would filter it: then speculative output is
distributed exactly as plain sampling with these settings.

    probs = softmax(logits / temperature)
    top-k: keep the k most likely tokens (ties broken by position), renormalise
    top-p: keep the smallest most-likely-first set whose mass reaches top_p, renormalise

The rules live once, in `engines/model/sampler.filtered_probs` (which plain decoding's
Sampler draws from); this module adds the settings record and SpeculativeError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from inferlab.engines.model import sampler as model_sampler
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
    try:
        return model_sampler.filtered_probs(logits, settings.temperature, settings.top_k,
                                            settings.top_p)
    except ValueError as e:
        raise SpeculativeError(f"logits: {e}") from None


def check_drafter_sampling(settings, seed) -> None:
    """A drafter's sampling settings and seed, checked: SpeculativeError naming the bad one."""
    if not isinstance(settings, SamplingSettings):
        raise SpeculativeError(f"settings must be SamplingSettings, got {settings!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SpeculativeError(f"seed must be an integer, got {seed!r}")
