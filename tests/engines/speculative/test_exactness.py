"""Exactness in distribution: speculative sampling emits what plain sampling from the target
would, under Pearson's chi-square test (>= 100,000 independent trials, several seeds,
p > 0.001), with temperature, top-k and top-p applied to both target and draft."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.speculative.rejection import rejection_sample_batch
from inferlab.engines.speculative.sampling import SamplingSettings, filtered_probs
from tests.engines.speculative.chi_square import chi_square_p_value
from tests.engines.speculative.trials import chain_trials, distributions, draw_rows

P_MIN = 0.001
N_TRIALS = 100_000
SETTINGS = [
    SamplingSettings(),
    SamplingSettings(temperature=0.7, top_k=8),
    SamplingSettings(top_p=0.8),
    SamplingSettings(temperature=1.3, top_k=12, top_p=0.9),
]


def _name(s: SamplingSettings) -> str:
    return f"T{s.temperature}-k{s.top_k}-p{s.top_p}"


def test_the_chi_square_helper_agrees_with_closed_forms():
    # 2 degrees of freedom: survival exp(-x / 2); a fair die matched exactly: p = 1
    x = torch.tensor(3.7, dtype=torch.float64)
    assert float(torch.special.gammaincc(torch.tensor(1.0, dtype=torch.float64), x / 2)) == \
        pytest.approx(float(torch.exp(-x / 2)))
    assert chi_square_p_value(torch.arange(6).repeat(100), torch.full((6,), 1 / 6)) == \
        pytest.approx(1.0)
    assert chi_square_p_value(torch.zeros(600, dtype=torch.int64), torch.full((6,), 1 / 6)) < 1e-9
    assert chi_square_p_value(torch.tensor([2]), torch.tensor([0.5, 0.5, 0.0])) == 0.0


@pytest.mark.parametrize("settings", SETTINGS, ids=_name)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_first_emitted_token_is_distributed_as_the_target(settings, seed):
    k, vocab = 3, 20
    p, q = distributions(seed, k + 1, vocab, settings)
    assert not torch.allclose(p, q)
    out = chain_trials(p, q[:k], N_TRIALS, torch.Generator().manual_seed(100 + seed))
    assert bool(out.resampled.any()) and bool((out.n_accepted == k).any())
    p_value = chi_square_p_value(out.tokens[:, 0], p[0])
    print(f"first token {_name(settings)} seed {seed}: p = {p_value:.4f}")
    assert p_value > P_MIN


@pytest.mark.parametrize("seed", [3, 4])
def test_each_position_given_acceptance_so_far_is_distributed_as_the_target(seed):
    # the token emitted at position i, among trials that accepted all drafts before it, is
    # distributed as p_i (the rows here do not depend on the drafts)
    settings = SamplingSettings(temperature=0.9, top_k=10)
    k, vocab = 3, 12
    p, q = distributions(seed, k + 1, vocab, settings, draft_noise=0.6)
    out = chain_trials(p, q[:k], N_TRIALS, torch.Generator().manual_seed(200 + seed))
    for i in range(1, k + 1):
        reached = out.n_accepted >= i
        p_value = chi_square_p_value(out.tokens[reached, i], p[i])
        print(f"position {i} seed {seed}: p = {p_value:.4f} ({int(reached.sum())} trials)")
        assert p_value > P_MIN


def _tables(seed: int, vocab: int, settings: SamplingSettings):
    """Target and draft models over two tokens: p1 [V] and p2 [V, V] (row a: p(. | a)), a
    third table for the bonus; the draft's likewise, all filtered with `settings`."""
    g = torch.Generator().manual_seed(seed)
    target = [torch.randn(vocab, generator=g) * 1.2, torch.randn(vocab, vocab, generator=g) * 1.2,
              torch.randn(vocab, vocab, generator=g)]
    draft = [t + torch.randn(t.shape, generator=g) * 0.8 for t in target]
    return ([filtered_probs(t, settings) for t in target],
            [filtered_probs(t, settings) for t in draft])


@pytest.mark.parametrize("settings", [SETTINGS[0], SETTINGS[3]], ids=_name)
@pytest.mark.parametrize("seed", [0, 1])
def test_two_token_sequences_match_the_targets_joint_distribution(settings, seed):
    vocab, n = 10, 200_000
    (p1, p2, p3), (q1, q2, q3) = _tables(seed, vocab, settings)
    g = torch.Generator().manual_seed(300 + seed)
    # step 1: two drafts x1 ~ q1, x2 ~ q2(. | x1); the target scores p1, p2(. | x1), p3(. | x2)
    x1 = draw_rows(q1.expand(n, vocab), g)
    x2 = draw_rows(q2[x1], g)
    step = rejection_sample_batch(torch.stack([p1.expand(n, vocab), p2[x1], p3[x2]], dim=1),
                                  torch.stack([q1.expand(n, vocab), q2[x1]], dim=1),
                                  torch.stack([x1, x2], dim=1),
                                  torch.rand(n, 3, generator=g, dtype=torch.float64))
    first, second = step.tokens[:, 0], step.tokens[:, 1].clone()
    # trials that rejected x1 emitted one token: a second step (one draft) continues them
    short = step.n_accepted == 0
    y = first[short]
    m = int(short.sum())
    z = draw_rows(q2[y], g)
    follow = rejection_sample_batch(torch.stack([p2[y], p3[z]], dim=1), q2[y][:, None],
                                    z[:, None], torch.rand(m, 2, generator=g,
                                                           dtype=torch.float64))
    second[short] = follow.tokens[:, 0]
    assert bool((second >= 0).all())
    joint = p1[:, None] * p2  # p(a, b) = p1(a) p2(b | a)
    p_value = chi_square_p_value(first * vocab + second, joint.flatten())
    print(f"joint {_name(settings)} seed {seed}: p = {p_value:.4f}")
    assert p_value > P_MIN


@pytest.mark.parametrize("settings", SETTINGS, ids=_name)
def test_a_draft_equal_to_the_target_is_always_accepted(settings):
    k = 4
    p, _ = distributions(5, k + 1, 16, settings)
    out = chain_trials(p, p[:k], 20_000, torch.Generator().manual_seed(5))
    assert bool((out.n_accepted == k).all())
    assert not bool(out.resampled.any())


@pytest.mark.parametrize("settings", SETTINGS[1:], ids=_name)
def test_tokens_masked_by_top_k_or_top_p_are_never_emitted(settings):
    k, vocab = 3, 20
    p, q = distributions(6, k + 1, vocab, settings, draft_noise=2.0)
    assert bool((p == 0).any())
    # a draft filtered with its own logits covers tokens the target masks: they get drafted
    out = chain_trials(p, q[:k], N_TRIALS, torch.Generator().manual_seed(6))
    drafted_masked = (p[:k].gather(1, torch.arange(vocab).expand(k, vocab)) == 0) & (q[:k] > 0)
    assert bool(drafted_masked.any())
    for i in range(k + 1):
        emitted = out.tokens[:, i][out.tokens[:, i] >= 0]
        assert bool((p[i][emitted] > 0).all()), f"position {i} emitted a masked token"



def test_the_chi_square_test_catches_a_sampler_that_is_not_exact():
    # the power check: after a rejection, drawing from p instead of the residual (a classic
    # bug) over-weights the tokens the draft favours; the same test must reject it
    k, vocab = 1, 20
    p, q = distributions(0, k + 1, vocab, SamplingSettings())
    g = torch.Generator().manual_seed(7)
    out = chain_trials(p, q[:k], N_TRIALS, g)
    first = out.tokens[:, 0].clone()
    rejected = out.n_accepted == 0
    first[rejected] = draw_rows(p[0].expand(int(rejected.sum()), vocab), g)
    assert chi_square_p_value(first, p[0]) < 1e-6
    assert chi_square_p_value(out.tokens[:, 0], p[0]) > P_MIN
