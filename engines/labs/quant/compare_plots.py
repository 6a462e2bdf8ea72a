"""The quantization lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_quant_section`'s records: every scheme's held-out perplexity against its weight
memory (the lab's Pareto plot, one point per scheme run), and per weight scheme the SQNR of
each quantized linear against its fp32 weight, in layer order (one category per linear;
an exact reproduction, SQNR = +inf, is not drawn).
"""

from __future__ import annotations

import math

from inferlab.engines.labs.quant.records import QuantSnapshot
from inferlab.engines.trace.overlay import Curve, Plot

MB = 1e6


def quant_plots(snapshot: QuantSnapshot) -> list[Plot]:
    """`snapshot`: what read_quant_section returns. No plot before any scheme ran."""
    runs = snapshot.runs
    if not runs:
        return []
    plots = [Plot("Perplexity against weight memory (one point per scheme)",
                  "weight memory (MB = 10⁶ bytes)", "perplexity, held-out mean",
                  (Curve("schemes", [r.weight_bytes / MB for r in runs],
                         [r.perplexity for r in runs], "points"),))]
    for run in runs:
        if not run.sqnr_db:
            continue
        names = tuple(run.sqnr_db)
        drawn = [i for i, n in enumerate(names) if math.isfinite(run.sqnr_db[n])]
        plots.append(Plot(f"SQNR per linear: {run.scheme}", "linear (layer order)",
                          "SQNR (dB)",
                          (Curve(run.scheme, drawn, [run.sqnr_db[names[i]] for i in drawn]),),
                          x_ticks=names))
    return plots
