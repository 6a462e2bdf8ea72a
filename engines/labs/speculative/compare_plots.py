"""The speculative lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_speculative_section`'s records: the acceptance rate by draft position (steps that
accepted draft i over steps that drafted, vLLM's per-position rate) and the tokens emitted
so far after each target forward (the steeper, the more tokens each forward gave).
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.labs.speculative.records import SpeculativeSnapshot
from inferlab.engines.trace.overlay import Curve, Plot


def speculative_plots(read: SpeculativeSnapshot) -> list[Plot]:
    """`read`: what read_speculative_section returns. No plot before a run."""
    steps = read.steps
    if read.header is None or not steps:
        return []
    rates = read.metrics["acceptance_rate_by_position"]
    plots = []
    if rates:
        plots.append(Plot("Acceptance by draft position", "draft position i (1 = a step's first)",
                          "steps accepting draft i (%)",
                          (Curve("acceptance", np.arange(1, len(rates) + 1),
                                 100.0 * np.asarray(rates)),)))
    emitted = np.cumsum([len(s.token_ids) for s in steps])
    plots.append(Plot("Tokens emitted by target forward", "target forwards",
                      "tokens emitted",
                      (Curve("tokens", np.arange(1, len(steps) + 1), emitted, steps=True),)))
    return plots
