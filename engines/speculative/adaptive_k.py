"""Choosing K each step: draft as many tokens as pay for themselves on this machine, none when
drafting does not pay.

With α_j the chance that the j-th draft of a step is accepted given that the drafts before it
were, K drafts yield on average

    E(K) = 1 + α_1 + α_1·α_2 + ... + α_1···α_K    tokens per target forward   (E(0) = 1)

(the geometric (1 - α^(K+1)) / (1 - α) when every α_j is one α: statistics.
expected_tokens_positional). One α undervalues long drafts where acceptance comes in runs,
as it does where the answer copies from the prompt: SmolLM2 on the lab's grounded prompts
accepted 0.74 of drafts overall, and a K chosen on that one number (mean 3.5) ran 0.96x
transformers' +2/-1 schedule, which reaches K 8 within a copied span. K drafts cost, in units
of one plain decode step (a 1-token target forward),

    T(K) = K · c + v(K)                   c: draft cost per token, v(K): the K+1-token forward

so the expected speedup of K over plain decoding is E(K) / T(K) (statistics.speedup_model's
form, with the E above).
`AdaptiveK` measures all three on the run itself: each α_j from the steps that tried a j-th
draft (a Beta prior centred on α_(j-1), α_1's on the step-wide α, so a position seldom
reached follows the one before it; all exponentially forgetting old steps), c from the
drafter's time per drafted token, v(K) from the target's forward times per query length
(until a length has been timed: the v(K) curve measured on this machine when given,
`verify_cost.verify_cost_ratios`, else a prior line). It chooses the K in 0..k_max with the
largest predicted speedup, 0 (plain decoding) unless some K > 0 beats 1 by `margin`.

Among plain steps it drafts `probe_k` tokens anyway, so a prompt that starts copying later is
noticed: as often as keeps the probes' extra cost (probe_k·c + v(probe_k) − 1 each) within
`probe_budget` of plain decoding's time (2 %: a prompt that copies nothing costs that much
more than plain decoding), at least every `probe_every` steps. Where a probe is nearly free
(an n-gram draft, v(2) ≈ 1.02 here) it probes every step, which on the lab's grounded prompts
found copied spans that a probe every 8 steps missed (one answer took 18 forwards instead of
12, and the policy ran 0.95x transformers' schedule).

The choice depends only on past steps, never on the draft being verified, so the verifier's
rejection sampling stays exact for any K (the target's distribution is kept).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from inferlab.engines.speculative.statistics import expected_tokens_positional

DEFAULT_VERIFY_SLOPE = 0.06
"""Prior for v(K) = 1 + slope · K before a length is timed (the native runtime's
`verify_cost_ratio_k4` of 1.25 on SmolLM2 fp32 is 1 + 0.0625 · 4)."""


@runtime_checkable
class KPolicy(Protocol):
    """What `SpeculativeDecoder(k_policy=...)` asks of a per-step K policy: the most it may
    choose, a choice before each step (from past steps only, so rejection sampling stays
    exact), and each step's outcome after it."""

    k_max: int
    chosen: list[int]

    def choose(self) -> int: ...

    def observe(self, drafted: int, accepted: int, query_tokens: int, forward_s: float,
                draft_s: float) -> None: ...


@dataclass
class HeuristicK:
    """transformers' `num_assistant_tokens_schedule="heuristic"` (assisted generation): start
    at `start` drafts; after a step that accepted every draft, two more; after any rejection,
    one fewer (never below 1). It never chooses plain decoding and knows no costs: the anchor
    `AdaptiveK` is measured against. Capped at `k_max`, as the cache is sized for it."""

    k_max: int = 8
    start: int = 5
    chosen: list[int] = field(default_factory=list)
    _k: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.start <= self.k_max:
            raise ValueError(f"HeuristicK needs 1 <= start <= k_max, got {self.start}, "
                             f"{self.k_max}")
        self._k = float(self.start)

    def choose(self) -> int:
        k = min(self.k_max, int(self._k))
        self.chosen.append(k)
        return k

    def observe(self, drafted: int, accepted: int, query_tokens: int, forward_s: float,
                draft_s: float) -> None:
        if drafted == 0:  # no draft was made (no n-gram match): nothing was learnt
            return
        self._k = min(float(self.k_max), self._k + 2.0) if accepted == drafted \
            else max(1.0, self._k - 1.0)


def _smoothed(old: float | None, new: float) -> float:
    """A timing's running estimate: the first measurement, then 0.7 old + 0.3 new."""
    return new if old is None else 0.7 * old + 0.3 * new


@dataclass
class AdaptiveK:
    """A per-step K policy for `SpeculativeDecoder(k_policy=...)`; see the module doc."""

    k_max: int = 8
    probe_every: int = 64
    probe_k: int = 2
    probe_budget: float = 0.02
    """The probes' extra cost on a prompt that copies nothing, as a share of plain decoding."""
    margin: float = 0.05
    prior_alpha: float = 0.5
    prior_weight: float = 1.0
    forget: float = 0.8
    """At each step that drafted, the counts so far are kept at this weight (recent steps
    count most): an answer is tens of steps, and copied spans start and end within it (on
    the grounded prompts 0.95 kept K 8 for seven steps after a span ended; 0.8 drafts as
    cheaply as transformers' schedule there, 0.7 less so)."""
    verify_prior: Mapping[int, float] | None = None
    """v(K) per K before that query length is timed in this run (None: 1 + 0.06 K)."""
    chosen: list[int] = field(default_factory=list)
    """The K chosen for each step so far."""
    _accepted: float = 0.0
    _drafted: float = 0.0  # drafts tried: accepted ones, plus the first rejected of a step
    _pos_accepted: list[float] = field(default_factory=list)  # per draft position j - 1
    _pos_tried: list[float] = field(default_factory=list)
    _forward_s: dict[int, float] = field(default_factory=dict)  # query length -> EWMA s
    _draft_s_per_token: float | None = None
    _plain_run: int = 0

    def __post_init__(self) -> None:
        if self.k_max < 1 or self.probe_every < 1 or not 1 <= self.probe_k <= self.k_max \
                or not self.probe_budget > 0:
            raise ValueError(f"AdaptiveK needs k_max >= 1, probe_every >= 1, 1 <= probe_k "
                             f"<= k_max and probe_budget > 0, got {self.k_max}, "
                             f"{self.probe_every}, {self.probe_k}, {self.probe_budget}")
        self._pos_accepted = [0.0] * self.k_max
        self._pos_tried = [0.0] * self.k_max

    @property
    def alpha(self) -> float:
        """The running acceptance estimate (the prior's mean before any draft)."""
        return (self._accepted + self.prior_alpha * self.prior_weight) / \
            (self._drafted + self.prior_weight)

    def position_alphas(self) -> list[float]:
        """α_1..α_kmax: each position's acceptance given the drafts before it were accepted,
        shrunk by `prior_weight` tries towards the position before it (the first towards the
        step-wide `alpha`): a position never tried yet takes the deepest one measured, as
        acceptance within a copied span stays high rather than falling back to the mean."""
        prior, w, out = self.alpha, self.prior_weight, []
        for acc, tried in zip(self._pos_accepted, self._pos_tried, strict=True):
            prior = (acc + prior * w) / (tried + w)
            out.append(prior)
        return out

    def _prior_verify_cost(self, k: int) -> float:
        if self.verify_prior and k in self.verify_prior:
            return max(1.0, float(self.verify_prior[k]))
        return 1.0 + DEFAULT_VERIFY_SLOPE * k

    def verify_cost(self, k: int) -> float:
        """v(K): the measured forward time of K+1 query tokens over that of 1 (for lengths not
        yet timed: `verify_prior`, else the prior line)."""
        one = self._forward_s.get(1)
        timed = self._forward_s.get(k + 1)
        if one and timed:
            return max(1.0, timed / one)
        return self._prior_verify_cost(k)

    def _one_forward_s(self) -> float | None:
        """A 1-token forward's seconds: timed, or (a run that never decoded plainly yet) the
        shortest timed length's over its prior v."""
        if self._forward_s.get(1):
            return self._forward_s[1]
        timed = [n for n, s in self._forward_s.items() if s > 0]
        if not timed:
            return None
        n = min(timed)
        return self._forward_s[n] / self._prior_verify_cost(n - 1)

    def draft_cost(self) -> float:
        """c: the drafter's seconds per drafted token over one plain forward (0 until a draft
        and a forward are timed). Without the forward's estimate a costly drafter would look
        free to a policy that never chose plain decoding, and never would."""
        one = self._one_forward_s()
        if self._draft_s_per_token is None or not one:
            return 0.0
        return self._draft_s_per_token / one

    def probe_interval(self) -> int:
        """Plain steps from one probe to the next: the fewest that keep each probe's extra
        cost, spread over them, within `probe_budget`; never more than `probe_every`."""
        cost = self.probe_k * self.draft_cost() + self.verify_cost(self.probe_k) - 1.0
        return max(1, min(self.probe_every, math.ceil(cost / self.probe_budget - 1e-9)))

    def speedups(self) -> dict[int, float]:
        """Predicted speedup of every K in 0..k_max on what has been measured so far."""
        alphas, c = self.position_alphas(), self.draft_cost()
        return {0: 1.0} | {k: expected_tokens_positional(alphas[:k])
                           / (k * c + self.verify_cost(k)) for k in range(1, self.k_max + 1)}

    def choose(self) -> int:
        """K for the next step."""
        table = self.speedups()
        best = max(range(1, self.k_max + 1), key=lambda k: table[k])
        k = best if table[best] > 1.0 + self.margin else 0
        if k == 0:
            self._plain_run += 1
            if self._plain_run >= self.probe_interval():
                k, self._plain_run = self.probe_k, 0
        else:
            self._plain_run = 0
        self.chosen.append(k)
        return k

    def observe(self, drafted: int, accepted: int, query_tokens: int, forward_s: float,
                draft_s: float) -> None:
        """One step's outcome: drafts proposed and accepted, the target forward's query length
        and seconds, the drafter's seconds."""
        # Verification stops at the first rejection: the drafts after it were never tried,
        # so a step is `accepted` successes and (if it stopped early) one failure.
        # Plain steps (nothing drafted) leave the estimate as it is: forgetting with no new
        # evidence would drift it back to the prior and restart drafting that did not pay.
        trials = accepted + (1 if accepted < drafted else 0)
        if trials:
            self._accepted = self._accepted * self.forget + accepted
            self._drafted = self._drafted * self.forget + trials
            for j in range(self.k_max):  # position j + 1 was tried, and accepted or not
                self._pos_accepted[j] = self._pos_accepted[j] * self.forget + (j < accepted)
                self._pos_tried[j] = self._pos_tried[j] * self.forget + (j < trials)
        if forward_s > 0:
            self._forward_s[query_tokens] = _smoothed(self._forward_s.get(query_tokens),
                                                      forward_s)
        if drafted > 0 and draft_s >= 0:
            self._draft_s_per_token = _smoothed(self._draft_s_per_token, draft_s / drafted)
