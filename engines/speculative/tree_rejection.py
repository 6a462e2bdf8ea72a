"""Multi-candidate rejection sampling over a token tree (SpecInfer's scheme), exact.

At a node whose target distribution is r (first p at that position), its children c_1, c_2, ..
are tried in turn, each drawn independently from its own q_j (siblings drawn i.i.d. from one
q, or n-gram candidates that are each certain, q_j one-hot):

    accept c_j with probability min(1, r(c_j) / q_j(c_j))   -> move down to c_j, r = p there
    reject:  r <- normalise(max(0, r - q_j)), try the next sibling
    no sibling left: emit a draw from r (RESAMPLED), or from p at a leaf (BONUS)

Why exact: one rejection step with target r and a draft from q_j emits a token distributed
as r, whether the draft or a draw from the residual; trying the next (independent) sibling
against the residual instead of drawing from it is again one such step, with target the
residual. By induction the emitted token is distributed as p, and so on down the tree.

Greedy mode follows the target's argmax: at each node, move to the first child whose token is
the argmax; emit the argmax where no child matches.

Target rows: row 0 is p after the root (the committed prefix), row i + 1 is p after node i.
Uniforms: u[i] decides node i when it is tried, u[N] draws the last token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inferlab.engines.speculative import mass
from inferlab.engines.speculative.checks import check_vocab, prob_tensor, uniform_tensor
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.sampling import SamplingSettings, filtered_probs
from inferlab.engines.speculative.tree import ROOT, TokenTree
from inferlab.engines.speculative.verification import TokenFate, TreeVerification


@dataclass(frozen=True)
class BatchTreeVerification:
    """B independent trees of one shape, verified; tensors.

    accepted [B, N] (bool): the nodes on each accepted path; last [B]: the token drawn at
    the end of the path; final_node [B]: where the path ends (-1: the root); resampled [B]
    (bool): the last token came from a residual (some child of final_node was rejected).
    """

    accepted: torch.Tensor
    last: torch.Tensor
    final_node: torch.Tensor
    resampled: torch.Tensor


def tree_rejection_sample_batch(parents: Sequence[int], tokens: torch.Tensor,
                                target_probs: torch.Tensor, draft_probs: torch.Tensor,
                                uniforms: torch.Tensor) -> BatchTreeVerification:
    """Verify B trees sharing `parents` (N nodes): tokens [B, N], target_probs [B, N+1, V],
    draft_probs [B, N, V] (row i: the q node i was drawn from), uniforms [B, N+1]."""
    n = len(parents)
    if tokens.dim() != 2 or tokens.shape[1] != n or target_probs.dim() != 3:
        raise SpeculativeError(f"tokens must be [B, {n}] and target_probs [B, {n + 1}, V]")
    b, vocab = tokens.shape[0], target_probs.shape[2]
    if (target_probs.shape != (b, n + 1, vocab) or draft_probs.shape != (b, n, vocab)
            or uniforms.shape != (b, n + 1)):
        raise SpeculativeError(
            f"shapes disagree: {n} nodes and B={b} need target_probs {(b, n + 1, vocab)}, "
            f"draft_probs {(b, n, vocab)}, uniforms {(b, n + 1)}; got "
            f"{tuple(target_probs.shape)}, {tuple(draft_probs.shape)}, {tuple(uniforms.shape)}")
    p = target_probs.double()
    q = draft_probs.double()
    u = uniforms.double()
    x = tokens.long()
    node = torch.full((b,), ROOT, dtype=torch.int64)  # where each trial's path is now
    r = p[:, 0].clone()  # the distribution the next child of `node` is tested against
    tried = torch.zeros(b, dtype=torch.bool)  # a child of `node` has been rejected
    accepted = torch.zeros(b, n, dtype=torch.bool)
    for i, parent in enumerate(parents):  # parents before children: one pass suffices
        active = node == parent
        x_i = x[:, i : i + 1]
        r_x = r.gather(-1, x_i)[:, 0]
        q_x = q[:, i].gather(-1, x_i)[:, 0]
        if bool((active & (q_x <= 0)).any()):
            raise SpeculativeError(f"tree node {i}'s token has probability 0 under its "
                                   "draft_probs row: drafts must be drawn from the q they report")
        take = active & (u[:, i] * q_x < r_x)
        reject = active & ~take
        r = torch.where(take[:, None], p[:, i + 1],
                        torch.where(reject[:, None], mass.residual(r, q[:, i]), r))
        node = torch.where(take, i, node)
        tried = torch.where(take, False, tried | reject)
        accepted[:, i] = take
    last = mass.draw(r, u[:, n])
    return BatchTreeVerification(accepted, last, node, tried)


def _one_hot(tree: TokenTree, vocab: int) -> torch.Tensor:
    index = torch.tensor(tree.tokens, dtype=torch.int64)[:, None]
    return torch.zeros(len(tree), vocab, dtype=torch.float64).scatter_(1, index, 1.0)


def _record(tree: TokenTree, final_node: int, last: int, resampled: bool,
            uniforms: tuple[float, ...]) -> TreeVerification:
    path = tree.path(final_node)
    on_path = set(path)
    fates = (TokenFate.ACCEPTED,) * len(path) + (
        TokenFate.RESAMPLED if resampled else TokenFate.BONUS,)
    return TreeVerification(token_ids=tuple(tree.tokens[i] for i in path) + (last,), path=path,
                            accepted=tuple(i in on_path for i in range(len(tree))), fates=fates,
                            uniforms=uniforms)


def tree_rejection_sample(tree: TokenTree, target_probs: torch.Tensor,
                          draft_probs: torch.Tensor | None,
                          generator: torch.Generator | None = None,
                          uniforms: Sequence[float] | torch.Tensor | None = None
                          ) -> TreeVerification:
    """Verify one tree: target_probs [N+1, V], draft_probs [N, V] (None: every node certain,
    q one-hot, as for n-gram candidates). The N + 1 uniforms come from `generator` unless
    given."""
    n = len(tree)
    p = prob_tensor(target_probs, "target_probs", n + 1, None)
    vocab = p.shape[1]
    tokens = torch.tensor(tree.tokens, dtype=torch.int64)
    check_vocab(tokens, vocab, "tree tokens")
    q = _one_hot(tree, vocab) if draft_probs is None else prob_tensor(draft_probs, "draft_probs",
                                                                       n, vocab)
    u = uniform_tensor(uniforms, n + 1, generator)
    batch = tree_rejection_sample_batch(tree.parents, tokens[None], p[None], q[None], u[None])
    return _record(tree, int(batch.final_node[0]), int(batch.last[0]), bool(batch.resampled[0]),
                   tuple(u.tolist()))


def greedy_tree_verify(tree: TokenTree, target_scores: torch.Tensor) -> TreeVerification:
    """Follow the target's argmax down the tree; target_scores [N+1, V] (logits or probs)."""
    n = len(tree)
    if target_scores.dim() != 2 or target_scores.shape[0] != n + 1:
        raise SpeculativeError(f"target_scores must have shape [{n + 1}, V] for a tree of {n} "
                               f"nodes, got {tuple(target_scores.shape)}")
    check_vocab(torch.tensor(tree.tokens), target_scores.shape[1], "tree tokens")
    best = target_scores.detach().cpu().argmax(dim=-1).tolist()
    node, tried = ROOT, False
    for i, parent in enumerate(tree.parents):
        if parent != node:
            continue
        if tree.tokens[i] == best[node + 1]:
            node, tried = i, False
        else:
            tried = True
    return _record(tree, node, best[node + 1], tried, ())


def verify_tree(tree: TokenTree, target_logits: torch.Tensor, settings: SamplingSettings, *,
                draft_probs: torch.Tensor | None = None,
                generator: torch.Generator | None = None) -> TreeVerification:
    """The tree's verify step from the target's logits [N+1, V] under `settings`; draft_probs
    as in `tree_rejection_sample` (None: one-hot). Greedy settings follow the argmax."""
    if settings.greedy:
        return greedy_tree_verify(tree, target_logits)
    return tree_rejection_sample(tree, filtered_probs(target_logits, settings), draft_probs,
                                 generator=generator)
