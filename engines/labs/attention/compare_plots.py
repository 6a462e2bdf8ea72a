"""The attention lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_attention_section`'s records: the bytes the stepped execution has read from and
written to main memory after each step (its own counters; two runs of different executions
side by side show where they part), the closed forms' bytes read and written by each of the
three executions at the run's shape, and, where the lab timed them, each kernel's time per
call against N (log-log, one plot per kernel so that A's and B's of one kernel pair up).
"""

from __future__ import annotations

from inferlab.engines.attention.step import EXECUTIONS
from inferlab.engines.labs.attention.records import AttentionSnapshot
from inferlab.engines.labs.attention.section import TIMING_SERIES
from inferlab.engines.trace.overlay import Curve, Plot


def attention_plots(read: AttentionSnapshot) -> list[Plot]:
    """`read`: what read_attention_section returns. No plot without a run or timings."""
    info, records, timings = read.run, read.steps, read.timings
    plots = []
    if info is not None and records:
        step = [r.step + 1 for r in records]
        plots.append(Plot("Main-memory bytes by step", "step", "bytes so far",
                          (Curve(f"read ({info.execution})", step,
                                 [r.bytes_read for r in records]),
                           Curve(f"written ({info.execution})", step,
                                 [r.bytes_written for r in records], dashed=True)),
                          log_y=True))
    if info is not None:
        at = f"N = {info.n}, d = {info.d}, Br = {info.br}, Bc = {info.bc}, H = {info.heads}"
        for what, field in (("read", "bytes_read"), ("written", "bytes_written")):
            plots.append(Plot(f"Bytes {what} per execution (closed form)", "execution",
                              "bytes", (Curve(at, range(len(EXECUTIONS)),
                                              [getattr(info.closed_forms[e], field)
                                               for e in EXECUTIONS], "points"),),
                              log_y=True, x_ticks=EXECUTIONS))
    for key, name in TIMING_SERIES:
        points = [(row["n"], 1e3 * row[key]) for row in timings if row.get(key)]
        if points:
            n, ms = zip(*points, strict=True)
            plots.append(Plot(f"Time per call against N: {name}", "N (tokens)",
                              "time per call (ms)", (Curve(name, n, ms),),
                              log_x=True, log_y=True))
    return plots
