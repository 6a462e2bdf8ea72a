"""The MCU lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_mcu_section`'s records: each planner's arena in use over the steps of the run (the
highest arena byte any live buffer reaches at each step: `ArenaLayout.high_water`; the chosen
planner solid, the compared one dashed), and each operator's time on the host interpreter
and on the board where they ran (the lab's per-op table).
"""

from __future__ import annotations

from inferlab.engines.labs.mcu.records import McuSnapshot
from inferlab.engines.trace.overlay import Curve, Plot


def mcu_plots(snapshot: McuSnapshot) -> list[Plot]:
    """`snapshot`: what read_mcu_section returns. No plot without a model."""
    state = snapshot.state
    if state is None or not state.layouts:
        return []
    curves = tuple(Curve(layout.planner, [s for s, _ in layout.high_water],
                         [b for _, b in layout.high_water], steps=True, dashed=i > 0)
                   for i, layout in enumerate(state.layouts) if layout.high_water)
    plots = [Plot("Arena in use by step", "step",
                  "highest arena byte in use (bytes)", curves)] if curves else []
    for where, attr in (("host", "host_us"), ("board", "board_us")):
        timed = [(i, getattr(r, attr)) for i, r in enumerate(state.ops)
                 if getattr(r, attr) is not None]
        if timed:
            plots.append(Plot(f"Time per operator on the {where}", "operator (graph order)",
                              "time (µs)", (Curve(f"{where} µs", [i for i, _ in timed],
                                                   [us for _, us in timed], "points"),),
                              x_ticks=tuple(f"{r.op}#{r.index}" for r in state.ops)))
    return plots
