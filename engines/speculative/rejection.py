"""The exact rejection sampler: K drafts verified against the target in one go.

Draft token x_i was drawn from the draft's q_i; the target's forward gave p_0 .. p_K (p_i
after the prefix and the drafts before x_i, p_K after all of them). Then

    accept x_i with probability min(1, p_i(x_i) / q_i(x_i))   (u_i * q_i(x_i) < p_i(x_i))
    at the first rejection j:   emit a draw from normalise(max(0, p_j - q_j)), stop
    all K accepted:             emit a bonus draw from p_K

and every emitted token is distributed exactly as plain sampling from p would give it
(Leviathan et al. 2023, Chen et al. 2023). Every position's test is computed at once (one
tensor op over K, and over a batch of independent trials); only the run of passes from the
start counts. Greedy mode accepts while the target's argmax agrees with the draft.

The uniforms are drawn up front, K + 1 per step: u_i for draft i, u_K for the last draw. The
same uniforms give the same tokens in the one-position-at-a-time reference (tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inferlab.engines.speculative import mass
from inferlab.engines.speculative.checks import (
    check_vocab,
    prob_tensor,
    token_tensor,
    uniform_tensor,
)
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.sampling import SamplingSettings, filtered_probs
from inferlab.engines.speculative.verification import TokenFate, Verification


@dataclass(frozen=True)
class BatchVerification:
    """B independent steps of K drafts, as tensors (for exactness tests and batched loops).

    tokens [B, K+1]: the emitted tokens, -1 past each step's n_accepted + 1; n_accepted [B];
    accepted [B, K] (bool); resampled [B] (bool): the last token came from the residual.
    """

    tokens: torch.Tensor
    n_accepted: torch.Tensor
    accepted: torch.Tensor
    resampled: torch.Tensor


def rejection_sample_batch(target_probs: torch.Tensor, draft_probs: torch.Tensor,
                           draft_tokens: torch.Tensor,
                           uniforms: torch.Tensor) -> BatchVerification:
    """Verify B steps at once: target_probs [B, K+1, V], draft_probs [B, K, V] (each row the q
    its draft token was drawn from), draft_tokens [B, K], uniforms [B, K+1] in [0, 1)."""
    if target_probs.dim() != 3 or draft_probs.dim() != 3 or draft_tokens.dim() != 2:
        raise SpeculativeError("target_probs, draft_probs and draft_tokens must be "
                               "[B, K+1, V], [B, K, V] and [B, K]")
    b, k1, vocab = target_probs.shape
    k = k1 - 1
    if k < 1:
        raise SpeculativeError(f"K must be >= 1 draft token, got {k}")
    if draft_probs.shape != (b, k, vocab) or draft_tokens.shape != (b, k):
        raise SpeculativeError(
            f"shapes disagree: target_probs {tuple(target_probs.shape)} (B, K+1, V) needs "
            f"draft_probs {(b, k, vocab)} and draft_tokens {(b, k)}, got "
            f"{tuple(draft_probs.shape)} and {tuple(draft_tokens.shape)}")
    if uniforms.shape != (b, k1):
        raise SpeculativeError(f"uniforms must have shape {(b, k1)}, got {tuple(uniforms.shape)}")
    p = target_probs.double()
    q = draft_probs.double()
    x = draft_tokens.long()
    u = uniforms.double()
    p_x = p[:, :k].gather(-1, x[..., None])[..., 0]
    q_x = q.gather(-1, x[..., None])[..., 0]
    if bool((q_x <= 0).any()):
        raise SpeculativeError("draft_tokens hold a token of probability 0 under draft_probs: "
                               "drafts must be drawn from the q they report")
    passes = u[:, :k] * q_x < p_x  # every position tested at once: min(1, p/q) > u
    accepted = passes.to(torch.int64).cumprod(dim=-1).bool()  # only the run from the start
    n_accepted = accepted.sum(dim=-1)
    rows = torch.arange(b)
    p_last = p[rows, n_accepted]  # p_j at the first rejection j, or p_K after all K
    q_last = q[rows, n_accepted.clamp(max=k - 1)]
    resampled = n_accepted < k
    source = torch.where(resampled[:, None], mass.residual(p_last, q_last), p_last)
    last = mass.draw(source, u[:, k])
    tokens = torch.where(accepted, x, -1)
    tokens = torch.cat([tokens, torch.full((b, 1), -1, dtype=torch.int64)], dim=1)
    tokens[rows, n_accepted] = last
    return BatchVerification(tokens, n_accepted, accepted, resampled)


def _record(batch: BatchVerification, uniforms: tuple[float, ...]) -> Verification:
    n = int(batch.n_accepted[0])
    k = batch.accepted.shape[1]
    last_fate = TokenFate.RESAMPLED if n < k else TokenFate.BONUS
    return Verification(token_ids=tuple(batch.tokens[0, :n + 1].tolist()), n_accepted=n,
                        accepted=tuple(batch.accepted[0].tolist()),
                        fates=(TokenFate.ACCEPTED,) * n + (last_fate,), uniforms=uniforms)


def rejection_sample(target_probs: torch.Tensor, draft_probs: torch.Tensor | None,
                     draft_tokens: Sequence[int] | torch.Tensor,
                     generator: torch.Generator | None = None,
                     uniforms: Sequence[float] | torch.Tensor | None = None) -> Verification:
    """Verify one step of K drafts: target_probs [K+1, V], draft_probs [K, V] (None: each
    draft was certain, q one-hot, as for the n-gram drafter), draft_tokens [K].

    The K + 1 uniforms are drawn from `generator` unless given.
    """
    x = token_tensor(draft_tokens, "draft_tokens")
    k = x.shape[0]
    if k < 1:
        raise SpeculativeError("draft_tokens must hold K >= 1 tokens, got none")
    p = prob_tensor(target_probs, "target_probs", k + 1, None)
    vocab = p.shape[1]
    check_vocab(x, vocab, "draft_tokens")
    if draft_probs is None:
        q = torch.zeros(k, vocab, dtype=torch.float64).scatter_(1, x[:, None], 1.0)
    else:
        q = prob_tensor(draft_probs, "draft_probs", k, vocab)
    u = uniform_tensor(uniforms, k + 1, generator)
    batch = rejection_sample_batch(p[None], q[None], x[None], u[None])
    return _record(batch, tuple(u.tolist()))


def greedy_verify(target_scores: torch.Tensor,
                  draft_tokens: Sequence[int] | torch.Tensor) -> Verification:
    """Greedy verification: keep drafts while each equals the target's argmax, then emit the
    argmax where they first disagree (RESAMPLED) or after the last draft (BONUS).

    target_scores [K+1, V]: logits or probabilities (only the argmax is read).
    """
    x = token_tensor(draft_tokens, "draft_tokens")
    k = x.shape[0]
    if k < 1:
        raise SpeculativeError("draft_tokens must hold K >= 1 tokens, got none")
    if target_scores.dim() != 2 or target_scores.shape[0] != k + 1:
        raise SpeculativeError(f"target_scores must have shape [{k + 1}, V] for {k} drafts, "
                               f"got {tuple(target_scores.shape)}")
    check_vocab(x, target_scores.shape[1], "draft_tokens")
    best = target_scores.detach().cpu().argmax(dim=-1)
    accepted = (best[:k] == x).to(torch.int64).cumprod(dim=0).bool()
    n = int(accepted.sum())
    last_fate = TokenFate.RESAMPLED if n < k else TokenFate.BONUS
    return Verification(token_ids=tuple(x[:n].tolist()) + (int(best[n]),), n_accepted=n,
                        accepted=tuple(accepted.tolist()),
                        fates=(TokenFate.ACCEPTED,) * n + (last_fate,), uniforms=())


def verify_drafts(target_logits: torch.Tensor, draft_tokens: Sequence[int] | torch.Tensor,
                  settings: SamplingSettings, *, draft_logits: torch.Tensor | None = None,
                  draft_probs: torch.Tensor | None = None,
                  generator: torch.Generator | None = None) -> Verification:
    """The verify step from the target's logits [K+1, V] under `settings`.

    The draft's q is `draft_logits` [K, V] filtered with the same settings, or `draft_probs`
    as given (already filtered, the q the drafts were drawn from), or one-hot when neither
    is given. Greedy settings verify by argmax and ignore q.
    """
    if draft_logits is not None and draft_probs is not None:
        raise SpeculativeError("give draft_logits or draft_probs, not both")
    if settings.greedy:
        return greedy_verify(target_logits, draft_tokens)
    p = filtered_probs(target_logits, settings)
    q = filtered_probs(draft_logits, settings) if draft_logits is not None else draft_probs
    return rejection_sample(p, q, draft_tokens, generator=generator)
