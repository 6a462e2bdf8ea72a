"""Acceptance statistics on hand-worked numbers, and the theory against the sampler."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.sampling import SamplingSettings
from inferlab.engines.speculative.statistics import (
    acceptance_stats,
    break_even_alpha,
    estimate_alpha,
    expected_tokens_per_forward,
    expected_tokens_positional,
    speedup_model,
    speedup_model_drafted,
    speedup_with_prefill,
)
from tests.engines.speculative.trials import chain_trials, distributions

T, F = True, False


def test_counts_by_hand():
    # four drafting steps (the empty one drafted nothing): 2 + 1 + 0 + 3 of 12 accepted
    stats = acceptance_stats([[T, T, F], [T, F, F], [F, F, F], [T, T, T], []])
    assert (stats.num_drafts, stats.num_draft_tokens, stats.num_accepted_tokens) == (4, 12, 6)
    assert stats.acceptance_rate == 0.5
    assert stats.mean_acceptance_length == 2.5  # 1 + 6 / 4, as vLLM reports it
    assert stats.accepted_per_position == (3, 2, 1)
    assert stats.acceptance_rate_by_position == (0.75, 0.5, 0.25)


def test_steps_of_different_lengths_and_no_steps():
    stats = acceptance_stats([[T], [T, T, F, F]])
    assert stats.accepted_per_position == (2, 1, 0, 0)
    assert stats.acceptance_rate == pytest.approx(3 / 5)
    empty = acceptance_stats([])
    assert (empty.acceptance_rate, empty.mean_acceptance_length) == (0.0, 1.0)
    assert empty.acceptance_rate_by_position == ()


def test_an_acceptance_after_a_rejection_is_refused():
    with pytest.raises(SpeculativeError, match=r"steps\[1\]"):
        acceptance_stats([[T], [F, T]])


def test_alpha_is_the_mean_overlap():
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    q = torch.tensor([[0.25, 0.25, 0.5], [0.5, 0.5, 0.0]])
    assert estimate_alpha(p, q) == pytest.approx(0.5)  # overlaps 0.5 and 0.5
    assert estimate_alpha(p, p) == pytest.approx(1.0)
    with pytest.raises(SpeculativeError, match="one shape"):
        estimate_alpha(p, q[:1])


@pytest.mark.parametrize("alpha, k, expected", [
    (0.5, 3, 1.875),  # (1 - 0.5^4) / 0.5
    (0.0, 4, 1.0),  # nothing accepted: the target's own token only
    (1.0, 4, 5.0),  # everything accepted: K + 1
    (0.8, 1, 1.8),
])
def test_expected_tokens_per_target_forward(alpha, k, expected):
    assert expected_tokens_per_forward(alpha, k) == pytest.approx(expected)


def test_the_sum_equals_the_closed_form_and_is_continuous_at_one():
    for alpha in (0.1, 0.37, 0.9, 0.999):
        closed = (1 - alpha ** 6) / (1 - alpha)
        assert expected_tokens_per_forward(alpha, 5) == pytest.approx(closed, rel=1e-12)
    assert expected_tokens_per_forward(1 - 1e-12, 5) == pytest.approx(6.0, rel=1e-9)


def test_the_speedup_model():
    assert speedup_model(0.5, 3, 0.1) == pytest.approx(1.875 / 1.3)
    assert speedup_model(1.0, 4, 0.0) == 5.0  # a free, perfect draft
    assert speedup_model(0.0, 4, 0.25) == 0.5  # a useless draft halves the speed
    # alpha 0.8, K 2, free drafts, a 3-token forward costing 1.1 of one token's
    assert speedup_model(0.8, 2, 0.0, 1.1) == pytest.approx((1 + 0.8 + 0.64) / 1.1)


def test_the_speedup_model_over_the_drafts_made():
    """sum_i E(k_i) / sum_i (k_i c + v(k_i)), by hand: steps of 2, 0 and 4 drafts at alpha
    0.5, c 0.1, v(2) 1.1, v(4) 1.3 (a plain step: 1 token for 1 forward)."""
    v = {2: 1.1, 4: 1.3}
    tokens = 1.75 + 1.0 + 1.9375
    cost = (0.2 + 1.1) + 1.0 + (0.4 + 1.3)
    assert speedup_model_drafted(0.5, [2, 0, 4], 0.1, v) == pytest.approx(tokens / cost)
    # every step K drafts with v = 1 is the fixed-K model
    assert speedup_model_drafted(0.7, [3] * 5, 0.2, {3: 1.0}) == pytest.approx(
        speedup_model(0.7, 3, 0.2))
    with pytest.raises(SpeculativeError, match=r"draft lengths \[3\]"):
        speedup_model_drafted(0.5, [2, 3], 0.1, v)
    with pytest.raises(SpeculativeError, match="verify_costs"):
        speedup_model_drafted(0.5, [2], 0.1, {2: 0.5})


@pytest.mark.parametrize("call, match", [
    (lambda: expected_tokens_per_forward(0.5, 0), "k must be"),
    (lambda: expected_tokens_per_forward(1.5, 2), "alpha"),
    (lambda: expected_tokens_per_forward(math.nan, 2), "alpha"),
    (lambda: speedup_model(0.5, 2, -1.0), "cost_ratio"),
    (lambda: speedup_model(0.5, 2, math.inf), "cost_ratio"),
])
def test_bad_numbers_are_refused(call, match):
    with pytest.raises(SpeculativeError, match=match):
        call()


def test_measured_tokens_per_step_match_the_theory_for_the_measured_alpha():
    # the same p and q at every position: acceptances are independent with probability
    # alpha each, so the mean acceptance length is E = 1 + alpha + ... + alpha^K
    k, vocab, n_trials = 4, 16, 100_000
    p, q = distributions(8, 1, vocab, SamplingSettings(), draft_noise=0.7)
    p_rows, q_rows = p.expand(k + 1, vocab), q.expand(k, vocab)
    out = chain_trials(p_rows, q_rows, n_trials, torch.Generator().manual_seed(8))
    stats = acceptance_stats(out.accepted.tolist())
    alpha = estimate_alpha(p_rows[:k], q_rows)
    assert 0.3 < alpha < 0.95
    assert stats.acceptance_rate_by_position[0] == pytest.approx(alpha, abs=0.01)
    assert stats.mean_acceptance_length == pytest.approx(
        expected_tokens_per_forward(alpha, k), rel=0.01)


def test_the_theory_over_the_drafted_lengths_by_hand():
    from inferlab.engines.speculative.statistics import expected_tokens_per_forward_drafted

    # alpha 0.5: a step of 2 drafts emits 1 + 0.5 + 0.25, one with none emits 1
    assert expected_tokens_per_forward_drafted(0.5, [2, 0]) == pytest.approx(1.375)
    assert expected_tokens_per_forward_drafted(1.0, [4, 4, 1]) == pytest.approx(12 / 3)  # 5, 5, 2
    assert expected_tokens_per_forward_drafted(0.3, [0, 0]) == 1.0
    with pytest.raises(SpeculativeError):
        expected_tokens_per_forward_drafted(0.5, [])


def test_the_positional_expectation_by_hand():
    """1 + a1 + a1·a2 + ...: drafts 2 and 3 reached only through the ones before them."""
    assert expected_tokens_positional([0.5]) == pytest.approx(1.5)
    assert expected_tokens_positional([0.5, 0.8, 1.0]) == pytest.approx(1 + 0.5 + 0.4 + 0.4)
    assert expected_tokens_positional([0.0, 1.0]) == 1.0  # the first rejected: nothing after
    for bad in ([], [1.5], [-0.1], [float("nan")]):
        with pytest.raises(SpeculativeError):
            expected_tokens_positional(bad)


@given(st.floats(0.0, 1.0), st.integers(1, 12))
def test_one_alpha_at_every_position_is_the_geometric_expectation(alpha, k):
    assert expected_tokens_positional([alpha] * k) == pytest.approx(
        expected_tokens_per_forward(alpha, k), rel=1e-12)


def test_the_prefill_is_not_sped_up_by_hand():
    """Amdahl: 10 % of the plain time in prefill, the rest 2x faster: 1 / (0.1 + 0.45)."""
    assert speedup_with_prefill(2.0, 0.1) == pytest.approx(1 / 0.55)
    assert speedup_with_prefill(2.0, 0.0) == 2.0
    assert speedup_with_prefill(2.0, 1.0) == 1.0
    for bad in ((0.0, 0.1), (2.0, 1.5), (2.0, -0.1), (float("inf"), 0.1)):
        with pytest.raises(SpeculativeError):
            speedup_with_prefill(*bad)


def test_break_even_alpha_hand_worked():
    # K = 1, c = 0.5, v = 1: E = 1 + α must reach 1.5
    assert break_even_alpha(1, 0.5, 1.0) == pytest.approx(0.5, abs=1e-8)
    # K = 2, c = 0.15, v = 1.04: 1 + α + α² = 1.34 -> α = (-1 + sqrt(1 + 4 * 0.34)) / 2
    assert break_even_alpha(2, 0.15, 1.04) == pytest.approx((-1 + math.sqrt(2.36)) / 2, abs=1e-8)
    # free drafts and free verification: any α pays
    assert break_even_alpha(3, 0.0, 1.0) == 0.0
    # K = 1 at c = 1, v = 1.5: two tokens at most, 2.5 forwards' cost: never pays
    assert break_even_alpha(1, 1.0, 1.5) is None


@pytest.mark.parametrize("k,c,v", [(1, 0.1, 1.0), (2, 0.15, 1.04), (4, 0.05, 1.2), (8, 0.02, 1.5)])
def test_break_even_alpha_is_where_the_model_crosses_one(k, c, v):
    a = break_even_alpha(k, c, v)
    assert speedup_model(a, k, c, v) == pytest.approx(1.0, abs=1e-7)
    assert speedup_model(max(0.0, a - 0.01), k, c, v) < 1.0 < speedup_model(min(1.0, a + 0.01), k, c, v)
