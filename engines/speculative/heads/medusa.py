"""Medusa's draft heads: K residual blocks on the target's last hidden state, head k guessing
the token k places after the target's own next one.

    h_k(t) = f_t + SiLU(W_k · f_t + b_k)                (W_k, b_k zero at the start, as Medusa's)
    draft k at t = argmax over the draft vocabulary of rms(h_k(t)) · W_lm[d2t]ᵀ

f_t: the target's residual stream after its last layer at position t (before the final norm).
The target's own head on f_t gives token t+1; head k gives token t+1+k. Unlike Medusa-1,
which gives each head its own lm_head (initialised from the target's), the heads here share
the target's final norm and lm_head frozen over the draft vocabulary (`FrozenHead`): a head
file holds K·(d² + d) numbers, not K·V·d. Drafting a chain of K tokens is ONE call on f at
the last position the target ran: no draft-to-draft dependence (hence its lower acceptance).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from inferlab.engines.speculative.heads.dims import HeadDims, init_parameters


class MedusaHeads(nn.Module):
    def __init__(self, dims: HeadDims, seed: int = 0) -> None:
        super().__init__()
        if dims.n_medusa < 1:
            raise ValueError(f"medusa needs at least one head, got {dims.n_medusa}")
        self.dims = dims
        self.blocks = nn.ModuleList(nn.Linear(dims.d_model, dims.d_model, bias=True)
                                    for _ in range(dims.n_medusa))
        init_parameters(self, seed, zero=("blocks.",))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """h_k of hidden states [..., d]: [n_medusa, ..., d]."""
        return torch.stack([feats + F.silu(block(feats)) for block in self.blocks])
