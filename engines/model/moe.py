"""A Mixture-of-Experts MLP: a router picks k of E experts per token; their outputs, weighted
by the router, are summed, plus the shared experts every token runs.

    p = softmax(h · W_routerᵀ)                  (fp32, over all E experts)
    w, e = top-k(p)                             (renormalised to sum 1 where `norm_topk`)
    y = Σ_j w_j · expert_{e_j}(h) + shared(h)   (Qwen2-MoE gates shared by sigmoid(h · g))

`forward_grouped` sorts the step's (token, expert) pairs by expert and runs each chosen expert
once on all of its tokens, so each expert's weights are read once per step: the way serving
engines run MoE (vLLM's fused_moe, DeepEP's grouped GEMMs). `forward_per_token` runs each
token's experts one row at a time, reading an expert's weights once per token that chose it:
the baseline the MoE bench and lab compare against. Both give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from inferlab.engines.model.config import ModelConfig


@dataclass
class ExpertWeights:
    """One gated MLP: gate_up (2·d_ff out, gate rows first) and down, any linear kind."""

    gate_up: object
    down: object


@dataclass
class MoEWeights:
    """A MoE layer's router (a linear d → E), routed experts and shared expert (or None)."""

    router: object
    experts: list[ExpertWeights]
    shared: ExpertWeights | None = None
    shared_gate: object | None = None
    last_routing: torch.Tensor | None = field(default=None, repr=False)
    """The expert ids [T, k] the last forward chose (the MoE lab reads them)."""

    def linears(self) -> list:
        items = [self.router]
        for e in self.experts + ([self.shared] if self.shared else []):
            items += [e.gate_up, e.down]
        return items + ([self.shared_gate] if self.shared_gate is not None else [])


def gated(x: torch.Tensor, kind: str) -> torch.Tensor:
    """act(gate) · up of a [T, 2·d_ff] gate_up product: SiLU (SwiGLU) or tanh GELU (GeGLU)."""
    half = x.shape[-1] // 2
    gate, up = x[..., :half], x[..., half:]
    if kind == "geglu":
        return F.gelu(gate, approximate="tanh") * up
    return F.silu(gate) * up


def route(cfg: ModelConfig, moe: MoEWeights, h: torch.Tensor
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights [T, k] fp32, expert ids [T, k]) for hidden states h [T, d]."""
    logits = moe.router(h).float()
    probs = torch.softmax(logits, dim=-1)
    weights, ids = torch.topk(probs, cfg.n_experts_active, dim=-1)
    if cfg.norm_topk:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    moe.last_routing = ids
    return weights, ids


def _expert(e: ExpertWeights, h: torch.Tensor, kind: str) -> torch.Tensor:
    return e.down(gated(e.gate_up(h), kind))


def _shared(cfg: ModelConfig, moe: MoEWeights, h: torch.Tensor) -> torch.Tensor | None:
    if moe.shared is None:
        return None
    y = _expert(moe.shared, h, cfg.mlp_kind).float()
    if moe.shared_gate is not None:
        y = torch.sigmoid(moe.shared_gate(h).float()) * y
    return y


def forward_grouped(cfg: ModelConfig, moe: MoEWeights, h: torch.Tensor) -> torch.Tensor:
    """The MoE MLP on h [T, d], each chosen expert run once on all its tokens; fp32 [T, d]."""
    weights, ids = route(cfg, moe, h)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=cfg.n_experts).tolist()
    token_of = order // cfg.n_experts_active
    weight_of = weights.reshape(-1)[order]
    out = torch.zeros(h.shape[0], cfg.d_model, dtype=torch.float32, device=h.device)
    start = 0
    for expert, n in enumerate(counts):
        if n == 0:
            continue
        rows = token_of[start:start + n]
        y = _expert(moe.experts[expert], h[rows], cfg.mlp_kind).float()
        out.index_add_(0, rows, y * weight_of[start:start + n, None])
        start += n
    shared = _shared(cfg, moe, h)
    return out if shared is None else out + shared


def forward_per_token(cfg: ModelConfig, moe: MoEWeights, h: torch.Tensor) -> torch.Tensor:
    """The same MoE MLP token by token: each (token, expert) pair a one-row product."""
    weights, ids = route(cfg, moe, h)
    out = torch.zeros(h.shape[0], cfg.d_model, dtype=torch.float32, device=h.device)
    for t in range(h.shape[0]):
        row = h[t:t + 1]
        for j in range(cfg.n_experts_active):
            y = _expert(moe.experts[int(ids[t, j])], row, cfg.mlp_kind).float()
            out[t] += weights[t, j] * y[0]
    shared = _shared(cfg, moe, h)
    return out if shared is None else out + shared


def experts_touched(ids: torch.Tensor) -> int:
    """Distinct experts a step's routing [T, k] reads."""
    return int(torch.unique(ids).numel())
