"""A speculative run's numbers over its steps (engines/speculative/statistics.py's
definitions): acceptance, tokens per forward, alpha against the geometric model's theory."""

from __future__ import annotations

from inferlab.engines.speculative.statistics import (
    acceptance_stats,
    expected_tokens_per_forward,
    expected_tokens_per_forward_drafted,
)


def geometric_alpha(steps) -> float:
    """alpha = accepted / drafts tested (a step stops testing at its first rejection): the
    per-draft acceptance rate of the geometric model behind (1 - alpha^(K+1)) / (1 - alpha)."""
    accepted = tested = 0
    for s in steps:
        n = sum(s.accepted)
        accepted += n
        tested += n + (1 if n < len(s.drafted) else 0)
    return accepted / tested if tested else 0.0


def speculative_metrics(steps, k: int) -> dict:
    """The run's numbers (statistics.py's definitions) over `steps`."""
    stats = acceptance_stats([s.accepted for s in steps])
    emitted = sum(len(s.token_ids) for s in steps)
    alpha = geometric_alpha(steps)
    drafting = [s for s in steps if s.drafted]
    return {
        "target_forwards": len(steps),
        "tokens": emitted,
        "acceptance_rate": stats.acceptance_rate,
        "acceptance_rate_by_position": list(stats.acceptance_rate_by_position),
        "mean_acceptance_length": stats.mean_acceptance_length,
        "tokens_per_target_forward": emitted / len(steps) if steps else 0.0,
        "tokens_per_drafting_forward": (sum(len(s.token_ids) for s in drafting) / len(drafting)
                                        if drafting else 0.0),
        "alpha": alpha,
        "theory_tokens_per_forward": expected_tokens_per_forward(alpha, k),
        # what the steps should have emitted with the drafts they had (fewer than K, or none)
        "theory_drafted_tokens_per_forward": expected_tokens_per_forward_drafted(
            alpha, [len(s.drafted) for s in steps]) if steps else 0.0,
        "draft_s": sum(s.draft_s for s in steps),
        "target_forward_s": sum(s.target_forward_s for s in steps),
        "finish_reason": steps[-1].finish_reason if steps else None,
    }
