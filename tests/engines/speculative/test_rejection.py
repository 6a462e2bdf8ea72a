"""The chain sampler: hand-worked steps, the record, and the vectorised sampler against the
one-position-at-a-time reference on the same uniforms."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.speculative.rejection import (
    greedy_verify,
    rejection_sample,
    rejection_sample_batch,
    verify_drafts,
)
from inferlab.engines.speculative.sampling import GREEDY, SamplingSettings, filtered_probs
from inferlab.engines.speculative.tree import TokenTree
from inferlab.engines.speculative.tree_rejection import tree_rejection_sample
from inferlab.engines.speculative.verification import TokenFate
from tests.engines.speculative.reference import reference_rejection_sample

A, R, B = TokenFate.ACCEPTED, TokenFate.RESAMPLED, TokenFate.BONUS

P = torch.tensor([[0.5, 0.3, 0.2, 0.0],
                  [0.1, 0.1, 0.4, 0.4],
                  [0.1, 0.2, 0.3, 0.4]])
Q = torch.tensor([[0.2, 0.6, 0.2, 0.0],
                  [0.0, 0.0, 0.2, 0.8]])


def test_a_rejection_draws_from_the_residual():
    # x0 = 1: p/q = 0.3/0.6 = 0.5 > u0 = 0.4, kept. x1 = 3: p/q = 0.4/0.8 = 0.5 <= u1 = 0.7,
    # rejected; residual max(0, p1 - q1) = (0.1, 0.1, 0.2, 0) / 0.4 = (.25, .25, .5, 0),
    # cumulative (.25, .5, 1, 1) first exceeds u2 = 0.6 at token 2
    v = rejection_sample(P, Q, [1, 3], uniforms=[0.4, 0.7, 0.6])
    assert v.token_ids == (1, 2)
    assert v.n_accepted == 1 and v.n_drafts == 2
    assert v.accepted == (True, False)
    assert v.fates == (A, R)
    assert v.uniforms == (0.4, 0.7, 0.6)


def test_all_accepted_earns_a_bonus_from_the_last_target_row():
    # u1 = 0.3 < 0.5 keeps x1; bonus from p2: cumulative (.1, .3, .6, 1) exceeds 0.65 at 3
    v = rejection_sample(P, Q, [1, 3], uniforms=[0.4, 0.3, 0.65])
    assert v.token_ids == (1, 3, 3)
    assert v.accepted == (True, True) and v.fates == (A, A, B)


def test_a_first_rejection_stops_even_where_later_drafts_would_pass():
    # x0 = 1, u0 = 0.9: 0.9 * q0(1) = 0.54 is not < p0(1) = 0.3, rejected; u1 = 0 would have
    # kept x1, but nothing after a rejection counts
    v = rejection_sample(P, Q, [1, 3], uniforms=[0.9, 0.0, 0.5])
    assert v.accepted == (False, False) and v.n_accepted == 0
    # residual max(0, p0 - q0) = (0.3, 0, 0, 0): token 0, the one the draft under-weights
    assert v.token_ids == (0,) and v.fates == (R,)


def test_one_hot_drafts_are_accepted_with_the_target_probability():
    # q None: x certain, accepted iff u < p(x); the residual is p without x
    v = rejection_sample(P, None, [0, 2], uniforms=[0.45, 0.41, 0.0])
    assert v.accepted == (True, False)
    assert v.token_ids == (0, 0)  # residual of p1 without token 2: (.1, .1, 0, .4) / .6
    assert rejection_sample(P, None, [0, 2], uniforms=[0.45, 0.39, 0.0]).token_ids == (0, 2, 0)


def test_the_generator_seeds_the_uniforms():
    a = rejection_sample(P, Q, [1, 3], generator=torch.Generator().manual_seed(3))
    b = rejection_sample(P, Q, [1, 3], generator=torch.Generator().manual_seed(3))
    assert a == b
    assert len(a.uniforms) == 3 and all(0 <= u < 1 for u in a.uniforms)


def _random_case(g: torch.Generator):
    k = int(torch.randint(1, 7, (1,), generator=g))
    vocab = int(torch.randint(2, 30, (1,), generator=g))
    settings = SamplingSettings(temperature=float(torch.rand(1, generator=g)) * 1.5 + 0.2,
                                top_k=int(torch.randint(0, vocab + 1, (1,), generator=g)),
                                top_p=float(torch.rand(1, generator=g)) * 0.9 + 0.1)
    logits = torch.randn(k + 1, vocab, generator=g) * 2
    p = filtered_probs(logits, settings)
    q = filtered_probs(logits[:k] + torch.randn(k, vocab, generator=g), settings)
    if bool(torch.rand(1, generator=g) < 0.2):
        q = p[:k].clone()  # a draft equal to the target: residuals with no mass are reached
    drafts = torch.multinomial(q, 1, generator=g)[:, 0]
    u = torch.rand(k + 1, generator=g, dtype=torch.float64)
    return p, q, drafts, u


def test_vectorised_equals_the_reference_on_the_same_uniforms():
    g = torch.Generator().manual_seed(11)
    fates_seen = set()
    for _ in range(400):
        p, q, drafts, u = _random_case(g)
        v = rejection_sample(p, q, drafts, uniforms=u)
        tokens, n, resampled = reference_rejection_sample(
            p.double().tolist(), q.double().tolist(), drafts.tolist(), u.tolist())
        assert list(v.token_ids) == tokens
        assert v.n_accepted == n
        assert v.fates[-1] == (R if resampled else B)
        fates_seen.add(v.fates[-1])
    assert fates_seen == {R, B}


def test_one_batch_equals_its_rows_verified_one_by_one():
    g = torch.Generator().manual_seed(12)
    k, vocab, b = 3, 9, 50
    p = torch.softmax(torch.randn(b, k + 1, vocab, generator=g), dim=-1)
    q = torch.softmax(torch.randn(b, k, vocab, generator=g), dim=-1)
    drafts = torch.multinomial(q.reshape(-1, vocab), 1, generator=g).reshape(b, k)
    u = torch.rand(b, k + 1, generator=g, dtype=torch.float64)
    batch = rejection_sample_batch(p, q, drafts, u)
    for i in range(b):
        v = rejection_sample(p[i], q[i], drafts[i], uniforms=u[i])
        n = v.n_accepted
        assert batch.tokens[i, : n + 1].tolist() == list(v.token_ids)
        assert bool((batch.tokens[i, n + 1:] == -1).all())
        assert tuple(batch.accepted[i].tolist()) == v.accepted


def test_the_chain_sampler_equals_the_tree_sampler_on_a_chain():
    g = torch.Generator().manual_seed(13)
    for _ in range(100):
        p, q, drafts, u = _random_case(g)
        chain = rejection_sample(p, q, drafts, uniforms=u)
        tree = tree_rejection_sample(TokenTree.chain(drafts.tolist()), p, q, uniforms=u)
        assert tree.token_ids == chain.token_ids
        assert tree.accepted == chain.accepted and tree.fates == chain.fates


# greedy: the target's argmax per row is 3, 1, 4, 0
SCORES = torch.tensor([[0.0, 1, 2, 9, 3],
                       [0.0, 5, 2, 1, 3],
                       [0.0, 1, 2, 3, 7],
                       [6.0, 1, 2, 3, 4]])


@pytest.mark.parametrize("drafts, tokens, accepted, fates", [
    ([3, 1, 2], (3, 1, 4), (True, True, False), (A, A, R)),  # corrected where they disagree
    ([3, 1, 4], (3, 1, 4, 0), (True, True, True), (A, A, A, B)),  # all agree: the bonus
    ([0, 1, 4], (3,), (False, False, False), (R,)),  # later agreement counts for nothing
])
def test_greedy_accepts_while_the_argmax_agrees(drafts, tokens, accepted, fates):
    v = greedy_verify(SCORES, drafts)
    assert (v.token_ids, v.accepted, v.fates, v.uniforms) == (tokens, accepted, fates, ())
    # logits or their probabilities: only the argmax matters; verify_drafts routes greedy here
    assert greedy_verify(torch.softmax(SCORES, -1), drafts) == v
    assert verify_drafts(SCORES, drafts, GREEDY) == v


def test_verify_drafts_filters_target_and_draft_logits_alike():
    g = torch.Generator().manual_seed(14)
    settings = SamplingSettings(temperature=0.8, top_k=5, top_p=0.9)
    target, draft = torch.randn(3, 10, generator=g), torch.randn(2, 10, generator=g)
    q = filtered_probs(draft, settings)
    drafts = torch.multinomial(q, 1, generator=g)[:, 0]
    a = verify_drafts(target, drafts, settings, draft_logits=draft,
                      generator=torch.Generator().manual_seed(1))
    b = rejection_sample(filtered_probs(target, settings), q, drafts,
                         generator=torch.Generator().manual_seed(1))
    c = verify_drafts(target, drafts, settings, draft_probs=q,
                      generator=torch.Generator().manual_seed(1))
    assert a == b == c
