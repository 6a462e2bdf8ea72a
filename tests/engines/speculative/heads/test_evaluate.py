"""The held-out acceptance figures (heads/evaluate.py) on a hand-worked example: a drafter
whose j-th draft is wrong at j = last mod 3, over a 10-token text the target wrote itself."""

from __future__ import annotations

import torch

from inferlab.engines.speculative.heads import evaluate
from inferlab.engines.speculative.heads.sequence import TrainingSequence


def test_per_position_acceptance_by_hand(monkeypatch):
    n = 10
    tokens = torch.arange(100, 100 + n)
    greedy = torch.cat([tokens[1:], torch.tensor([7])])  # every token is the target's own
    hidden = torch.eye(n, 16)  # row t's argmax tells the fake drafter the position

    def fake_chain(heads, scorer, feat, k):
        last = int(feat.argmax()) + 2  # the feature is u[last - 2]
        drafts = [int(tokens[last + j]) for j in range(k)]
        if last % 3 < k:
            drafts[last % 3] = -1  # wrong from there on
        return drafts, None

    monkeypatch.setattr(evaluate, "medusa_chain", fake_chain)
    acc = evaluate.chain_acceptance(object(), None, None,
                                    [TrainingSequence("t", tokens, hidden, greedy)], k=3)
    # last = 2..9: reach 3,3,3,3,3,3,2,1; accepted n = 2,0,1,2,0,1,2,0
    assert acc["positions"] == 8
    assert acc["tokens_per_forward"] == 16 / 8
    assert acc["first_token_agreement"] == 5 / 8
    assert acc["accept_by_position"] == [5 / 8, 3 / 5, 0 / 2]
