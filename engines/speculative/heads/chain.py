"""Drafting a chain of K tokens with a head, given the target's real features: the one
routine both the drafters and the held-out acceptance curve run.

EAGLE, with real pairs (u_t, x_{t+1}) for t <= L - 2 already in the head's cache:

    û_{L-1} = head(last real pair)     d_1 = argmax draft logits(û_{L-1})
    û_L     = head((û_{L-1}, d_1))     d_2 = …                      (K head forwards)

Medusa: d_k = argmax draft logits(h_k(u_{L-2})), k = 1..K, from ONE call (K <= its heads).
"""

from __future__ import annotations

import torch

from inferlab.engines.speculative.heads.eagle import EagleHead, HeadCache
from inferlab.engines.speculative.heads.medusa import MedusaHeads
from inferlab.engines.speculative.heads.target_head import FrozenHead


def argmax_pick(scorer: FrozenHead):
    """`pick(draft_logits) -> token id`: the greedy choice over the draft vocabulary."""
    return lambda logits: int(scorer.vocab.d2t[int(logits.argmax())])


def eagle_chain(head: EagleHead, scorer: FrozenHead, embed, cache: HeadCache,
                last_out: torch.Tensor, k: int, pick=None) -> tuple[list[int], list[torch.Tensor]]:
    """K draft tokens (full-vocabulary ids, each `pick(draft logits)`, default the argmax)
    and their draft-vocabulary logits, after the head's output `last_out` [d] at the last
    real pair (cache position length - 1). The drafts' own pairs join `cache` (the caller
    truncates them away after verification). `embed(ids)` -> [n, d] the target's input
    embeddings."""
    pick = pick or argmax_pick(scorer)
    tokens: list[int] = []
    rows: list[torch.Tensor] = []
    out = last_out
    for i in range(k):
        logits = scorer(out)
        token = pick(logits)
        tokens.append(token)
        rows.append(logits)
        if i < k - 1:
            e = embed(torch.tensor([token]))
            out = head(out.view(1, 1, -1), e.view(1, 1, -1), cache.length, cache)[0, -1]
    return tokens, rows


def medusa_chain(heads: MedusaHeads, scorer: FrozenHead, feat: torch.Tensor, k: int,
                 pick=None) -> tuple[list[int], list[torch.Tensor]]:
    """The first `k` heads' drafts on the feature `feat` [d] (u at the last real position),
    each `pick(draft logits)` (default the argmax)."""
    pick = pick or argmax_pick(scorer)
    logits = scorer(heads(feat.view(1, -1))[:k, 0])
    return [pick(row) for row in logits], list(logits)
