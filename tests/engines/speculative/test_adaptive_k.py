"""Adaptive K: the policy's arithmetic by hand, greedy output unchanged whatever K it picks,
plain decoding where drafts are rejected, long drafts where they are accepted, and the
target's distribution kept with K changing between steps."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.speculative.adaptive_k import AdaptiveK, HeuristicK
from inferlab.engines.speculative.decoder import SpeculativeDecoder
from inferlab.engines.speculative.drafter import Proposal
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.model_drafter import ModelDrafter
from inferlab.engines.speculative.ngram import NgramDrafter
from inferlab.engines.speculative.sampling import SamplingSettings
from tests.engines.speculative.chi_square import chi_square_p_value


def test_the_policy_predicts_with_the_statistics_formula():
    """Its table is E(K) / (K c + v(K)) on its own alpha, c and v (statistics.speedup_model),
    1.0 for K = 0: a free draft (c = 0) and the prior v before any timing."""
    policy = AdaptiveK(k_max=3, prior_alpha=0.8)
    table = policy.speedups()
    assert table[0] == 1.0
    for k in (1, 2, 3):  # v(K) = 1 + 0.06 K, the prior
        assert table[k] == pytest.approx(sum(0.8**i for i in range(k + 1)) / (1 + 0.06 * k))


def _feed(policy: AdaptiveK, steps: int, accept_all: bool, forward_1_s: float = 0.01):
    for _ in range(steps):
        k = policy.choose()
        accepted = k if accept_all else 0
        policy.observe(k, accepted, k + 1, forward_1_s * (1 + 0.05 * k), 0.0)


def test_rejected_drafts_lead_to_plain_decoding_with_probes():
    """A probe of 2 drafts costs v(2) - 1 = 0.10 here: within a 1 % budget that is one every
    10 plain steps, capped at every 8."""
    policy = AdaptiveK(k_max=6, probe_every=8, probe_k=2, probe_budget=0.01)
    _feed(policy, 80, accept_all=False)
    late = policy.chosen[40:]
    assert policy.alpha < 0.1
    assert policy.probe_interval() == 8
    assert late.count(0) >= 0.85 * len(late)  # plain steps, a probe every 8
    assert set(late) == {0, 2}


@pytest.mark.parametrize("v2, interval", [(1.01, 1), (1.02, 1), (1.05, 3), (1.10, 5),
                                          (1.30, 15)])
def test_probes_come_as_often_as_their_budget_allows(v2, interval):
    """The default budget of 2 % of plain decoding: a probe costing v(2) - 1 (drafts free)
    comes every ceil((v(2) - 1) / 0.02) plain steps; where all is rejected the probes' cost
    over the steps is within the budget."""
    policy = AdaptiveK(k_max=6, probe_k=2, verify_prior={k: 1 + (v2 - 1) * k / 2
                                                         for k in range(1, 7)})
    assert policy.probe_interval() == interval
    for _ in range(200):
        k = policy.choose()
        policy.observe(k, 0, k + 1, 0.0, 0.0)  # every draft rejected, nothing timed
    late = policy.chosen[100:]
    overhead = sum(policy.verify_cost(k) - 1 for k in late if k) / len(late)
    assert overhead <= 0.02 + (v2 - 1) / len(late)  # one probe of slack at the window's edge
    assert late.count(2) >= len(late) // interval - 1


def test_accepted_drafts_lead_to_long_drafts():
    policy = AdaptiveK(k_max=6)
    _feed(policy, 40, accept_all=True)
    assert policy.alpha > 0.9
    assert policy.chosen[-10:] == [6] * 10


def test_costly_drafts_shorten_k():
    """With each draft token costing half a forward, alpha 0.7 pays for little: K 1 (1.7 /
    1.56 at v = 1.06) beats K 2 (2.19 / 2.12) and every longer K."""
    policy = AdaptiveK(k_max=6, prior_alpha=0.7, prior_weight=1e9)  # alpha pinned at 0.7
    policy.observe(0, 0, 1, 0.01, 0.0)
    policy.observe(1, 1, 2, 0.0106, 0.005)  # v(1) = 1.06, c = 0.5
    table = policy.speedups()
    assert max(range(1, 7), key=table.get) == 1
    assert policy.choose() == 1


def test_position_alphas_and_the_choice_by_hand():
    """Steps that either reject the first draft (3) or accept all four (2): the step-wide
    alpha is (8 + 0.5) / (11 + 1) (8 accepted of 11 tried, the prior 0.5 weighing one try);
    the first position was tried 5 times and accepted twice, the later ones accepted both
    times tried; each is shrunk by one try towards the one before it (the first towards
    alpha). v(K) = 1 + 0.25 K from `verify_prior` (nothing timed: forward 0 s)."""
    prior = {k: 1.0 + 0.25 * k for k in range(1, 5)}
    policy = AdaptiveK(k_max=4, forget=1.0, verify_prior=prior)
    for accepted in (0, 4, 0, 4, 0):
        policy.observe(4, accepted, 5, 0.0, 0.0)
    alpha = 8.5 / 12
    assert policy.alpha == pytest.approx(alpha)
    a1 = (2 + alpha) / 6
    a2 = (2 + a1) / 3
    a3 = (2 + a2) / 3
    a4 = (2 + a3) / 3
    assert policy.position_alphas() == pytest.approx([a1, a2, a3, a4])
    table = policy.speedups()
    reach = [a1, a1 * a2, a1 * a2 * a3, a1 * a2 * a3 * a4]
    for k in range(1, 5):
        assert table[k] == pytest.approx((1 + sum(reach[:k])) / (1 + 0.25 * k))
    # the geometric E on one alpha would choose K 2; the positions say K 4 pays most
    geometric = {k: sum(alpha**i for i in range(k + 1)) / (1 + 0.25 * k) for k in range(1, 5)}
    assert max(geometric, key=geometric.get) == 2
    assert policy.choose() == 4


def test_an_untried_position_follows_the_deepest_tried():
    """Two steps accepting both of two drafts: positions 3 and 4, never tried, take position
    2's estimate, not the step-wide alpha."""
    policy = AdaptiveK(k_max=4, forget=1.0)
    for _ in range(2):
        policy.observe(2, 2, 3, 0.0, 0.0)
    alphas = policy.position_alphas()
    assert alphas[2] == alphas[3] == pytest.approx(alphas[1])
    assert alphas[1] > policy.alpha - 1e-12


def test_a_costly_drafter_is_priced_without_a_plain_forward():
    """Only K + 1-token forwards timed (the policy has not chosen plain decoding yet): one
    forward's time comes from the shortest over its prior v, so a draft costing 0.4 of a
    forward is priced, and at alpha ~0 the policy turns to plain decoding."""
    policy = AdaptiveK(k_max=4, verify_prior={k: 1.0 + 0.05 * k for k in range(1, 5)})
    for _ in range(6):
        k = policy.choose()
        if k == 0:
            break
        policy.observe(k, 0, k + 1, 0.010 * (1 + 0.05 * k), 0.004 * k)
    assert policy.draft_cost() == pytest.approx(0.4)
    assert policy.choose() == 0


def test_timed_lengths_override_the_verify_prior():
    policy = AdaptiveK(k_max=4, verify_prior={2: 1.5, 3: 1.9})
    assert policy.verify_cost(2) == 1.5 and policy.verify_cost(1) == pytest.approx(1.06)
    policy.observe(0, 0, 1, 0.010, 0.0)
    policy.observe(2, 2, 3, 0.012, 0.0)  # a 3-token forward timed: v(2) = 1.2
    assert policy.verify_cost(2) == pytest.approx(1.2)
    assert policy.verify_cost(3) == 1.9


def test_bad_policies_are_refused(tiny):
    with pytest.raises(ValueError):
        AdaptiveK(k_max=0)
    with pytest.raises(ValueError):
        AdaptiveK(k_max=4, probe_k=5)
    with pytest.raises(SpeculativeError, match="k_policy"):
        SpeculativeDecoder(tiny[0], NgramDrafter(), k_policy="auto")
    with pytest.raises(SpeculativeError, match="tree_width"):
        SpeculativeDecoder(tiny[0], NgramDrafter(), k_policy=AdaptiveK(), tree_width=2)


def test_the_heuristic_schedule_by_hand():
    """transformers' heuristic: +2 after a step accepting every draft, -1 after a rejection
    (never below 1, never above k_max); a step with no draft changes nothing."""
    policy = HeuristicK(k_max=8, start=5)
    outcomes = [(5, 5), (7, 7), (8, 8), (8, 3), (7, 0), (0, 0), (6, 0), (5, 0), (4, 0),
                (3, 0), (2, 0), (1, 0), (1, 1)]
    for drafted, accepted in outcomes:
        policy.choose()
        policy.observe(drafted, accepted, drafted + 1, 0.01, 0.0)
    policy.choose()
    assert policy.chosen == [5, 7, 8, 8, 7, 6, 6, 5, 4, 3, 2, 1, 1, 3]
    with pytest.raises(ValueError):
        HeuristicK(k_max=4, start=5)


PROMPTS = [list(b"the cat sat on the mat. the cat sat on the"), list(b"abcabcabc"), [7]]


@pytest.mark.parametrize("drafter", ["ngram", "model"])
def test_greedy_output_is_plain_greedy_output(tiny, drafter):
    model, tok = tiny
    for prompt in PROMPTS:
        plain = generate(model, [prompt], max_new_tokens=40).generations[0].token_ids
        d = NgramDrafter() if drafter == "ngram" else ModelDrafter(model, tokenizer=tok)
        for policy in (AdaptiveK(k_max=5, probe_every=3), HeuristicK(k_max=5, start=3)):
            if drafter == "model":
                d.reset()
            dec = SpeculativeDecoder(model, d, k_policy=policy)
            run = dec.generate(prompt, 40)
            assert tuple(run.token_ids) == tuple(plain)
            assert len(set(policy.chosen)) >= 1 and max(policy.chosen) <= 5


class _Sampled:
    """A drafter drawing each draft from a fixed distribution q with its own seed (the draft
    must be a sample of q, independent of the verifier's uniforms, for exactness)."""

    name = "sampled"

    def __init__(self, q: torch.Tensor, seed: int) -> None:
        self.q, self.vocab_size = q, q.numel()
        self.gen = torch.Generator().manual_seed(10_000 + seed)

    def propose(self, token_ids, k: int) -> Proposal:
        toks = torch.multinomial(self.q, k, replacement=True, generator=self.gen).tolist()
        return Proposal(tuple(toks), self.q.expand(k, -1).clone())


def test_the_first_token_keeps_the_targets_distribution_with_k_changing(tiny):
    """Sampling at temperature 1: the token after a fixed prompt, over many seeds, with a
    policy whose K changes between steps, is distributed as the target's softmax."""
    model, _ = tiny
    settings = SamplingSettings(temperature=1.0)
    prompt = list(b"hello")
    logits = model.forward_nocache(torch.tensor(prompt))[0].float()
    p = torch.softmax(logits, -1)
    q = torch.softmax(logits + torch.randn(logits.shape, generator=torch.Generator()
                                          .manual_seed(0)) * 1.5, -1)
    firsts, ks = [], set()
    for seed in range(3000):
        policy = AdaptiveK(k_max=3, probe_every=1, probe_k=1 + seed % 3, margin=10.0)
        dec = SpeculativeDecoder(model, _Sampled(q, seed), k_policy=policy, settings=settings,
                                 seed=seed)
        dec.start(prompt, 5)
        firsts.append(dec.step().token_ids[0])
        ks.update(policy.chosen)
    assert ks == {1, 2, 3}
    assert chi_square_p_value(torch.tensor(firsts), p) > 0.001
