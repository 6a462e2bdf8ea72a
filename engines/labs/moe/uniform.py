"""A uniform router: each token picks k of E experts uniformly at random, without repeats —
the routing the closed form E·(1 − (1 − k/E)^B) assumes (roofline.memory.experts_touched).
The bench and the tests draw it to check the formula against counts."""

from __future__ import annotations

import torch

from inferlab.engines.model.moe import experts_touched as distinct_experts
from inferlab.engines.roofline.memory import experts_touched


def uniform_routing(n_experts: int, top_k: int, n_tokens: int,
                    generator: torch.Generator) -> torch.Tensor:
    """Expert ids [n_tokens, top_k]: each row k distinct experts, every k-subset alike (the
    top k of E independent uniform draws)."""
    return torch.rand(n_tokens, n_experts, generator=generator).topk(top_k, dim=-1).indices


def measured_over_formula(n_experts: int, top_k: int, n_tokens: int, draws: int,
                          seed: int = 0) -> tuple[float, float]:
    """(mean distinct experts over `draws` seeded uniform routings of `n_tokens` tokens, the
    closed form's E·(1 − (1 − k/E)^B))."""
    gen = torch.Generator().manual_seed(seed)
    total = sum(distinct_experts(uniform_routing(n_experts, top_k, n_tokens, gen))
                for _ in range(draws))
    return total / draws, experts_touched(n_experts, top_k, n_tokens)
