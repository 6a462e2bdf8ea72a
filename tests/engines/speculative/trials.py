"""Batches of independent speculative trials for the exactness tests: fixed target and draft
distributions over a small vocabulary, drafts drawn from q, one vectorised verify."""

from __future__ import annotations

import torch

from inferlab.engines.speculative.rejection import BatchVerification, rejection_sample_batch
from inferlab.engines.speculative.sampling import SamplingSettings, filtered_probs


def distributions(seed: int, rows: int, vocab: int, settings: SamplingSettings,
                  draft_noise: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(p, q) [rows, vocab]: random target logits, the draft's = the target's plus noise (so
    they overlap but differ), both filtered with `settings`."""
    g = torch.Generator().manual_seed(seed)
    target_logits = torch.randn(rows, vocab, generator=g) * 1.5
    draft_logits = target_logits + torch.randn(rows, vocab, generator=g) * draft_noise
    return filtered_probs(target_logits, settings), filtered_probs(draft_logits, settings)


def draw_rows(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of probs [..., V] (the drafter's sampling)."""
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, replacement=True, generator=generator).reshape(
        probs.shape[:-1])


def chain_trials(p: torch.Tensor, q: torch.Tensor, n_trials: int,
                 generator: torch.Generator) -> BatchVerification:
    """n_trials independent steps with the same p [K+1, V] and q [K, V] rows."""
    q_b = q.expand(n_trials, *q.shape)
    drafts = draw_rows(q_b, generator)
    u = torch.rand(n_trials, p.shape[0], generator=generator, dtype=torch.float64)
    return rejection_sample_batch(p.expand(n_trials, *p.shape), q_b, drafts, u)
