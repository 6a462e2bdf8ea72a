"""Speculative decoding's numbers, measured and predicted, in one place.

Measured over verify steps (each step: the accepted flags of the drafts it verified), with
vLLM's definitions (its spec-decode counters num_drafts, num_draft_tokens,
num_accepted_tokens):

    acceptance_rate          = num_accepted_tokens / num_draft_tokens
    mean_acceptance_length   = 1 + num_accepted_tokens / num_drafts   (tokens per verify step,
                                                                       the bonus/resampled one
                                                                       included)
    acceptance rate at i     = steps that accepted draft i / num_drafts

Predicted, from the acceptance rate alpha of one draft (Leviathan et al. 2023):

    alpha                    = E[sum_x min(p(x), q(x))]   (1 - total-variation distance)
    tokens per target forward E = (1 - alpha^(K+1)) / (1 - alpha)          (K + 1 at alpha 1)
    speedup                  = E / (K * c + v(K)),   c = draft cost per token / target forward
                               cost, v(K) = cost of a K + 1-token target forward / a 1-token one

and over steps as they were drafted (step i proposed k_i drafts, none for a plain step):

    E_drafted                = mean_i E(k_i)                          (E(0) = 1)
    speedup_drafted          = sum_i E(k_i) / sum_i (k_i * c + v(k_i))   (v(0) = 1)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from inferlab.engines.speculative.errors import SpeculativeError


@dataclass(frozen=True)
class AcceptanceStats:
    """Counters over verify steps that drafted at least one token (vLLM's num_drafts)."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_position: tuple[int, ...]
    """Steps whose draft at position i was accepted."""

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts / drafted tokens (0 before any draft)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def mean_acceptance_length(self) -> float:
        """1 + accepted / drafts: tokens emitted per verify step (1 before any draft)."""
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else 1.0

    @property
    def acceptance_rate_by_position(self) -> tuple[float, ...]:
        """Steps that accepted draft i / all steps, per position i (vLLM's per-position rate)."""
        return tuple(a / self.num_drafts for a in self.accepted_per_position)


def acceptance_stats(steps: Sequence[Sequence[bool]]) -> AcceptanceStats:
    """Count over `steps`, each the accepted flags of one step's drafts (a run of True first,
    as `Verification.accepted`); steps that drafted nothing are not drafts and are skipped."""
    drafts = draft_tokens = accepted = 0
    per_position: list[int] = []
    for i, flags in enumerate(steps):
        flags = [bool(f) for f in flags]
        if not flags:
            continue
        n = next((j for j, f in enumerate(flags) if not f), len(flags))
        if any(flags[n:]):
            raise SpeculativeError(f"steps[{i}] accepts a draft after a rejected one: {flags}")
        drafts += 1
        draft_tokens += len(flags)
        accepted += n
        per_position.extend([0] * (len(flags) - len(per_position)))
        for j in range(n):
            per_position[j] += 1
    return AcceptanceStats(drafts, draft_tokens, accepted, tuple(per_position))


def estimate_alpha(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> float:
    """alpha = mean over positions of sum_x min(p(x), q(x)); target_probs, draft_probs [..., V]
    of one shape (the p and q each draft was verified and drawn with)."""
    if target_probs.shape != draft_probs.shape or target_probs.dim() < 1:
        raise SpeculativeError(f"target_probs {tuple(target_probs.shape)} and draft_probs "
                               f"{tuple(draft_probs.shape)} must have one shape [..., V]")
    if target_probs.numel() == 0:
        raise SpeculativeError("target_probs holds no positions to estimate alpha from")
    overlap = torch.minimum(target_probs.double(), draft_probs.double()).sum(dim=-1)
    return float(overlap.mean())


def _check_alpha_k(alpha: float, k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise SpeculativeError(f"k must be an integer >= 1, got {k!r}")
    if not (isinstance(alpha, int | float) and 0 <= alpha <= 1):
        raise SpeculativeError(f"alpha must be a number in [0, 1], got {alpha!r}")


def expected_tokens_per_forward(alpha: float, k: int) -> float:
    """E = (1 - alpha^(K+1)) / (1 - alpha), K + 1 at alpha = 1.

    Summed as 1 + alpha + ... + alpha^K, the same number without the cancellation the
    quotient suffers near alpha = 1.
    """
    _check_alpha_k(alpha, k)
    return math.fsum(alpha**i for i in range(k + 1))


def expected_tokens_positional(alphas: Sequence[float]) -> float:
    """E for K = len(alphas) drafts when the j-th draft is accepted with probability
    alphas[j-1] given that the ones before it were: 1 + a1 + a1·a2 + ... + a1···aK (the
    geometric E when every entry is one alpha). Copied text is accepted in runs (a draft after
    an accepted one is accepted more often than the first of a step), which one alpha cannot
    say: with it the geometric E undervalues long drafts."""
    if not alphas:
        raise SpeculativeError("no draft positions")
    for a in alphas:
        if not (isinstance(a, int | float) and 0 <= a <= 1):
            raise SpeculativeError(f"every alpha must be a number in [0, 1], got {a!r}")
    total, reach = [1.0], 1.0
    for a in alphas:
        reach *= a
        total.append(reach)
    return math.fsum(total)


def expected_tokens_per_forward_drafted(alpha: float, draft_lengths) -> float:
    """E over the steps as they were drafted: the mean of (1 - alpha^(k_i+1)) / (1 - alpha)
    for each step's own draft length k_i (a step that drafted nothing emits one token). The
    fixed-K theory assumes K drafts every step; a drafter that proposes fewer (an n-gram with
    no match, an adaptive K) emits less, and this is what it should emit."""
    lengths = list(draft_lengths)
    if not lengths:
        raise SpeculativeError("no steps to average over")
    return math.fsum(expected_tokens_per_forward(alpha, k) if k else 1.0
                     for k in lengths) / len(lengths)


def _check_cost(value: float, name: str, low: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= low):
        raise SpeculativeError(f"{name} must be a finite number >= {low:g}, got {value!r}")


def speedup_model(alpha: float, k: int, cost_ratio: float, verify_cost: float = 1.0) -> float:
    """Predicted speedup over plain decoding: E / (K * c + v(K)), c = draft/target cost ratio
    per draft token, v(K) = `verify_cost` (1: a K + 1-token forward costs what one token's
    does)."""
    _check_alpha_k(alpha, k)
    _check_cost(cost_ratio, "cost_ratio", 0.0)
    _check_cost(verify_cost, "verify_cost", 1.0)
    return expected_tokens_per_forward(alpha, k) / (k * cost_ratio + verify_cost)


def break_even_alpha(k: int, cost_ratio: float, verify_cost: float = 1.0) -> float | None:
    """The per-draft acceptance α* at which speculative decoding with K drafts breaks even:
    speedup_model(α*, K, c, v) = 1, i.e. E(α*, K) = K·c + v(K). A drafter pays only above it;
    None where even α = 1 does not pay (K + 1 ≤ K·c + v). 0.0 where any α pays. E rises with
    α, so the root is found by bisection (to 1e-9)."""
    _check_alpha_k(0.0, k)
    _check_cost(cost_ratio, "cost_ratio", 0.0)
    _check_cost(verify_cost, "verify_cost", 1.0)
    cost = k * cost_ratio + verify_cost
    if expected_tokens_per_forward(1.0, k) <= cost:
        return None
    if expected_tokens_per_forward(0.0, k) >= cost:
        return 0.0
    low, high = 0.0, 1.0
    while high - low > 1e-9:
        mid = (low + high) / 2
        if expected_tokens_per_forward(mid, k) < cost:
            low = mid
        else:
            high = mid
    return high


def speedup_with_prefill(decode_speedup: float, prefill_share: float) -> float:
    """The wall-clock speedup when a share of plain decoding's time (the prompt's prefill) is
    not sped up and the rest is `decode_speedup` times faster: 1 / (p + (1 - p) / s)
    (Amdahl's law). SmolLM2 on the lab's grounded prompts spends ~10 % of a plain decode in
    prefill, so a 2.3x model is 1.9x on the wall clock."""
    _check_cost(decode_speedup, "decode_speedup", 0.0)
    if decode_speedup == 0 or not (isinstance(prefill_share, int | float)
                                   and 0 <= prefill_share <= 1):
        raise SpeculativeError(f"need decode_speedup > 0 and 0 <= prefill_share <= 1, got "
                               f"{decode_speedup!r}, {prefill_share!r}")
    return 1.0 / (prefill_share + (1.0 - prefill_share) / decode_speedup)


def speedup_model_drafted(alpha: float, draft_lengths, cost_ratio: float,
                          verify_costs: Mapping[int, float]) -> float:
    """The speedup over the steps as they were drafted: sum_i E(k_i) / sum_i (k_i * c +
    v(k_i)), v(k) from `verify_costs` (measured per draft length; v(0) = 1, a plain step)."""
    lengths = list(draft_lengths)
    if not lengths:
        raise SpeculativeError("no steps to average over")
    _check_cost(cost_ratio, "cost_ratio", 0.0)
    missing = sorted({k for k in lengths if k and k not in verify_costs})
    if missing:
        raise SpeculativeError(f"verify_costs has no v(K) for draft lengths {missing}")
    for k in {k for k in lengths if k}:
        _check_cost(verify_costs[k], f"verify_costs[{k}]", 1.0)
    # mean E over the steps (E_drafted) times their number: the tokens they should emit
    tokens = expected_tokens_per_forward_drafted(alpha, lengths) * len(lengths)
    cost = math.fsum(k * cost_ratio + verify_costs[k] if k else 1.0 for k in lengths)
    return tokens / cost
