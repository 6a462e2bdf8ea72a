"""Bad input to the samplers: a SpeculativeError (a ValueError) naming what is wrong."""

from __future__ import annotations

import math

import pytest
import torch

from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.rejection import (
    greedy_verify,
    rejection_sample,
    rejection_sample_batch,
    verify_drafts,
)
from inferlab.engines.speculative.sampling import SamplingSettings
from inferlab.engines.speculative.tree import TokenTree
from inferlab.engines.speculative.tree_rejection import (
    greedy_tree_verify,
    tree_rejection_sample,
    tree_rejection_sample_batch,
)

P = torch.full((3, 5), 0.2)  # K = 2 drafts over 5 tokens
Q = torch.full((2, 5), 0.2)


def test_the_error_is_a_value_error():
    assert issubclass(SpeculativeError, ValueError)


@pytest.mark.parametrize("call, match", [
    (lambda: rejection_sample(P[:1], Q[:0], []), "K >= 1"),
    (lambda: greedy_verify(P[:1], []), "K >= 1"),
    (lambda: rejection_sample(P, Q, [1, 2, 3]), r"target_probs must have shape \[4, V\]"),
    (lambda: rejection_sample(P, Q[:, :4], [1, 2]), r"draft_probs must have shape \[2, 5\]"),
    (lambda: rejection_sample(P, Q[:1], [1, 2]), r"draft_probs must have shape \[2, 5\]"),
    (lambda: rejection_sample(P, Q, [1, 7]), "draft_tokens holds a token id outside"),
    (lambda: rejection_sample(P, Q, [1, -1]), "draft_tokens holds a token id outside"),
    (lambda: rejection_sample(P, Q, [1, 2.5]), "draft_tokens holds 2.5"),
    (lambda: rejection_sample(P, Q, [True, 2]), "draft_tokens holds True"),
    (lambda: rejection_sample(P, Q, torch.tensor([1.0, 2.0])), "draft_tokens must hold integer"),
    (lambda: rejection_sample(P, Q, [[1, 2]]), r"draft_tokens holds \[1, 2\], not a token id"),
    (lambda: rejection_sample(P, Q, torch.ones(1, 2).long()), "draft_tokens must be 1-d"),
    (lambda: rejection_sample(P * -1, Q, [1, 2]), "target_probs must hold finite"),
    (lambda: rejection_sample(P * math.nan, Q, [1, 2]), "target_probs must hold finite"),
    (lambda: rejection_sample(P * 0, Q, [1, 2]), "target_probs has a row with no"),
    (lambda: rejection_sample(P, Q.tolist(), [1, 2]), "draft_probs must be a tensor"),
    (lambda: rejection_sample(P, Q, [1, 2], uniforms=[0.1, 0.2]), "uniforms must hold 3"),
    (lambda: rejection_sample(P, Q, [1, 2], uniforms=[0.1, 0.2, 1.0]), r"uniforms must lie"),
    (lambda: rejection_sample(P, torch.eye(5)[:2], [1, 2]), "probability 0 under draft_probs"),
    (lambda: greedy_verify(P[:2], [1, 2]), r"target_scores must have shape \[3, V\]"),
    (lambda: greedy_verify(P, [1, 9]), "draft_tokens holds a token id outside"),
    (lambda: verify_drafts(P, [1, 2], SamplingSettings(), draft_logits=Q, draft_probs=Q),
     "not both"),
])
def test_the_chain_sampler_refuses(call, match):
    with pytest.raises(SpeculativeError, match=match):
        call()


@pytest.mark.parametrize("p, q, x, u, match", [
    (P[None], Q[None], torch.ones(1, 2), torch.rand(1, 2), "uniforms must have shape"),
    (P[None], Q[None], torch.ones(1, 3), torch.rand(1, 3), "shapes disagree"),
    (P[None], Q[:, :4][None], torch.ones(1, 2), torch.rand(1, 3), "shapes disagree"),
    (P[None, :1], Q[None, :0], torch.ones(1, 0), torch.rand(1, 1), "K must be >= 1"),
    (P, Q, torch.ones(2), torch.rand(3), r"\[B, K\+1, V\]"),
])
def test_the_batch_sampler_refuses_shapes_that_disagree(p, q, x, u, match):
    with pytest.raises(SpeculativeError, match=match):
        rejection_sample_batch(p, q, x.long(), u.double())


TREE = TokenTree.from_paths([[1, 2], [3]])  # 3 nodes


@pytest.mark.parametrize("call, match", [
    (lambda: tree_rejection_sample(TREE, P, None), r"target_probs must have shape \[4, V\]"),
    (lambda: tree_rejection_sample(TREE, torch.full((4, 3), 1 / 3), None), "tree tokens holds"),
    (lambda: tree_rejection_sample(TREE, torch.full((4, 5), 0.2), Q), "draft_probs must have"),
    (lambda: tree_rejection_sample(TREE, torch.full((4, 5), 0.2), torch.eye(5)[:3]),
     "node 0's token has probability 0"),
    (lambda: greedy_tree_verify(TREE, P), r"target_scores must have shape \[4, V\]"),
    (lambda: tree_rejection_sample_batch((-1, 0), torch.ones(2, 3).long(), torch.rand(2, 3, 5),
                                         torch.rand(2, 2, 5), torch.rand(2, 3)), "tokens must be"),
    (lambda: tree_rejection_sample_batch((-1, 0), torch.ones(2, 2).long(), torch.rand(2, 3, 5),
                                         torch.rand(2, 2, 4), torch.rand(2, 3)), "shapes disagree"),
])
def test_the_tree_sampler_refuses(call, match):
    with pytest.raises(SpeculativeError, match=match):
        call()
