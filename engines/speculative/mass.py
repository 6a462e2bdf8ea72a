"""The two distribution operations the chain and the tree samplers share.

    residual(p, q) = normalise(max(0, p - q))      what a rejection leaves to sample from
    draw(mass, u)  = the first token whose cumulative mass exceeds u * total mass

Both work in float64 and sum with `cumsum` (a sequential sum on the CPU), so that a plain
Python loop over the same numbers (the tests' reference) gets the same bits and therefore the
same tokens. `draw` never returns a token of zero mass: such a token adds nothing to the
cumulative sum, so the first cumulative value above the threshold is never its.
"""

from __future__ import annotations

import torch


def normalise(mass: torch.Tensor) -> torch.Tensor:
    """`mass` [..., V] (>= 0, each row with a positive total) scaled to sum to 1 per row."""
    return mass / mass.cumsum(dim=-1)[..., -1:]


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """normalise(max(0, p - q)) per row of p, q [..., V] (float64).

    Where p - q has no positive mass (p == q up to rounding, when a rejection has probability
    zero and is only reached through rounding) the row falls back to p itself.
    """
    mass = (p - q).clamp(min=0.0)
    total = mass.cumsum(dim=-1)[..., -1:]
    return torch.where(total > 0, mass / torch.where(total > 0, total, 1.0), p)


def draw(mass: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draws: for each row of `mass` [..., V] and uniform `u` [...] in [0, 1), the
    first token whose cumulative mass exceeds u * total (int64 [...])."""
    cdf = mass.cumsum(dim=-1)
    threshold = u.to(cdf.dtype)[..., None] * cdf[..., -1:]
    index = (cdf <= threshold).sum(dim=-1)  # cdf is non-decreasing: the count is the index
    # u * total can round up to total when u is within an ulp of 1: take the last token with
    # mass then, never a zero-mass token past it
    vocab = mass.shape[-1]
    last = vocab - 1 - (mass.flip(-1) > 0).to(torch.int64).argmax(dim=-1)
    return torch.minimum(index, last)
