"""The speculative lab's formulas with a snapshot's numbers (what its theory note shows): the
geometric model's tokens per target forward at the run's alpha and K, over every step's own
draft length, against what the run emitted. Every number comes from engines/speculative/
statistics.py, where the formulas live.
"""

from __future__ import annotations

from inferlab.engines.labs.speculative.records import SpeculativeSnapshot
from inferlab.engines.speculative.statistics import (
    expected_tokens_per_forward,
    expected_tokens_per_forward_drafted,
)


def speculative_formulas(read: SpeculativeSnapshot) -> list[tuple[str, str]]:
    """`read`: what read_speculative_section returns. (formula, substituted) pairs; none
    before a run."""
    steps, m = read.steps, read.metrics
    if read.header is None or not steps:
        return []
    a, k = m["alpha"], read.header.k
    lengths = [len(s.drafted) for s in steps]
    e = expected_tokens_per_forward(a, k)
    drafted = expected_tokens_per_forward_drafted(a, lengths)
    return [
        ("α = accepted ÷ drafts tested (a step stops at its first rejection)",
         f"α = {a:.4f}"),
        ("E = (1 − α^(K+1)) / (1 − α), tokens per target forward with K drafts every step",
         f"(1 − {a:.4f}^{k + 1}) / (1 − {a:.4f}) = {e:.3f}"),
        ("E_drafted = mean over steps of E(kᵢ), kᵢ each step's own draft length (E(0) = 1)",
         f"{drafted:.3f} over {len(steps)} steps; measured {m['tokens']} tokens / "
         f"{m['target_forwards']} forwards = {m['tokens_per_target_forward']:.3f}"),
    ]
