"""The shape of a draft head, read from its target: one decoder layer of the target's own
width (EAGLE), or K residual blocks (Medusa)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import torch

from inferlab.engines.model.llama import Llama

KINDS = ("eagle", "medusa")


@dataclass(frozen=True)
class HeadDims:
    kind: str
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    rope_theta: float
    norm_eps: float
    max_position: int
    n_medusa: int = 0
    """Medusa: how many heads (head k predicts the token k after the target's next one)."""

    @classmethod
    def of(cls, target: Llama, kind: str, n_medusa: int = 0) -> HeadDims:
        c = target.config
        return cls(kind, c.d_model, c.n_heads, c.n_kv_heads, c.d_head, c.d_ff,
                   float(c.rope_theta), float(c.norm_eps), int(c.max_position),
                   n_medusa if kind == "medusa" else 0)

    def to_dict(self) -> dict:
        return asdict(self)


def init_parameters(module: torch.nn.Module, seed: int, zero: tuple[str, ...] = ()) -> None:
    """Every parameter drawn from one generator seeded `seed`, in name order (so the same seed
    gives the same head, whatever the global RNG did): matrices ~ N(0, 1/d_in), vectors named
    `norm` ones, other vectors and the matrices named in `zero` zeros."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            if p.dim() == 2 and not any(z in name for z in zero):
                p.copy_(torch.randn(p.shape, generator=gen) * p.shape[1] ** -0.5)
            elif "norm" in name:
                p.fill_(1.0)
            else:
                p.zero_()


def unit_rms(f: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """f / sqrt(mean(f²) + eps) per row: the feature a head reads and predicts. The target's
    final norm makes its logits depend on f's direction only, and SmolLM2's residual stream
    is far from uniform (a dimension ~13× the row's RMS on average, the first token's row of
    norm ~4,000 against ~900): unnormalised, those would dominate the head's regression."""
    return f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + eps)


CONSTANT_MIN_ABS = 4.0
"""A feature dimension is held constant (`constant_dims`) when its mean |u| is at least this
(a typical dimension of a unit-RMS feature is ~1)..."""
CONSTANT_MAX_REL_STD = 0.1
"""...and its standard deviation at most this share of its mean."""


def constant_dims(features: Iterable[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(mask [d] bool, value [d]) of the dimensions of unit-RMS features (row blocks [n, d],
    summed in fp64 block by block) that are massive and nearly constant: |mean| >=
    CONSTANT_MIN_ABS and std <= CONSTANT_MAX_REL_STD · |mean|; value is their mean (0
    elsewhere). Gemma 3 270M's residual stream has one (dim 163: 23.4 ± 0.96 of a unit-RMS
    row, 86 % of its square); SmolLM2's has none."""
    n, total, squares = 0, None, None
    for block in features:
        b = block.double()
        total = b.sum(0) if total is None else total + b.sum(0)
        squares = b.pow(2).sum(0) if squares is None else squares + b.pow(2).sum(0)
        n += b.shape[0]
    if not n:
        raise ValueError("constant_dims needs at least one feature row")
    mean = total / n
    var = (squares - n * mean.pow(2)).clamp(min=0) / max(n - 1, 1)
    std = var.sqrt()
    mask = (mean.abs() >= CONSTANT_MIN_ABS) & (std <= CONSTANT_MAX_REL_STD * mean.abs())
    return mask, torch.where(mask, mean, torch.zeros_like(mean)).float()
