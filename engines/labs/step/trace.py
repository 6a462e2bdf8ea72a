"""A profiled step as Perfetto spans: each execution's step on a track of its own, each op a
span on its lane's track ("step eager · thread 0", "step native · native decoder"), placed
one after another in the trace from `start_s` (the recorder's clock)."""

from __future__ import annotations

from inferlab.engines.labs.step.records import ExecutionRecord

GAP_S = 1e-3
"""Between two executions' steps in the trace."""


def step_trace(recorder, executions: list[ExecutionRecord], start_s: float) -> float:
    """Spans of every execution's step and ops, the first step at `start_s`; returns where
    the next span may start."""
    at = start_s
    for record in executions:
        track = f"step {record.execution}"
        s = record.split
        recorder.add_span(f"{record.execution} step", at, at + record.step_s, cat="step",
                          args={"at_roof_s": s.at_roof_s, "inside_ops_s": s.inside_ops_s,
                                "between_ops_s": s.between_ops_s}, track=track)
        for op in record.ops:
            begin = at + max(op.start_s, 0.0)
            recorder.add_span(op.name, begin, begin + op.dur_s, cat="op",
                              args={"flops": op.flops, "bytes": op.bytes, "shapes": op.shapes,
                                    "layer": op.layer},
                              track=f"{track} · {op.lane}")
        at += record.step_s + GAP_S
    return at
