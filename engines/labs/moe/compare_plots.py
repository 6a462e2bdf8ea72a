"""The MoE lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_moe_section`'s records, over the B sweep: distinct experts per MoE layer measured
from the router, beside E·(1 − (1 − k/E)^B) dashed; weights read per step (MiB) measured,
beside the formula's dashed; and the decode step's time.
"""

from __future__ import annotations

from inferlab.engines.labs.moe.records import MoESnapshot
from inferlab.engines.trace.overlay import Curve, Plot

MIB = 2**20


def moe_plots(read: MoESnapshot) -> list[Plot]:
    """`read`: what read_moe_section returns. No plot without a sweep."""
    sweep = read.sweep
    if read.info is None or not sweep:
        return []
    b = [p.batch for p in sweep]
    return [
        Plot("Distinct experts per MoE layer against B", "batch B (tokens per step)",
             "experts", (Curve("measured", b, [p.distinct_experts for p in sweep]),
                         Curve("E·(1 − (1 − k/E)^B)", b,
                               [p.distinct_experts_formula for p in sweep], dashed=True)),
             log_x=True),
        Plot("Weights read per decode step against B", "batch B (tokens per step)",
             "weights read (MiB = 2²⁰ bytes)",
             (Curve("measured", b, [p.weight_bytes_per_step / MIB for p in sweep]),
              Curve("formula", b, [p.weight_bytes_per_step_formula / MIB for p in sweep],
                    dashed=True)), log_x=True),
        Plot("Decode step time against B", "batch B (tokens per step)", "time (ms)",
             (Curve("decode step", b, [p.step_s * 1e3 for p in sweep]),
              Curve("MoE layers, grouped", b, [p.grouped_s * 1e3 for p in sweep]),
              Curve("MoE layers, per token", b, [p.per_token_s * 1e3 for p in sweep],
                    dashed=True)), log_x=True),
    ]
