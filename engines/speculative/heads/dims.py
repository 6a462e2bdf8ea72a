"""The shape of a draft head, read from its target: one decoder layer of the target's own
width (EAGLE), or K residual blocks (Medusa)."""

from __future__ import annotations

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
