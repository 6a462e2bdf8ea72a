"""The one record the step lab's op table and ops roofline draw, from either source: a profiled
step's ops (`ExecutionRecord`, each op a call) or a trace's ops on a roof (`op_roofline.
OpPoint`, already grouped by name and shapes).

An `OpRow` is one op name and shapes of one series (an execution, or a trace), its calls
summed: time t, FLOPs F, bytes B (None: not costed — an op no rule costs, such as a fused
inductor kernel, is timed only), and its time at the roof t_roof = Σ max(F_i / P, B_i / W)
over its calls, on the roof of peak P and bandwidth W it is set against. From those:

    FLOP/s = F / t      bytes/s = B / t      of the roof = t_roof / t  (1: at the roof)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from inferlab.engines.profile.op_roofline import OpPoint
from inferlab.engines.profile.step_ops import StepOp, is_fused_kernel
from inferlab.engines.profile.step_split import Roof

FUSED_NOTE = "fused inductor kernel: timed, not costed (no FLOP rule for a fusion)"
UNCOSTED_NOTE = "not costed: no rule for this op (views, indexing, reductions)"


@dataclass(frozen=True)
class OpRow:
    series: str  # the execution ("eager") or "trace"
    name: str
    shapes: str
    calls: int
    time_s: float
    flops: float | None
    bytes: float | None
    at_roof_s: float | None
    peak_dtype: str = "fp32"  # whose peak FLOP/s the roof time used
    note: str = ""

    @property
    def costed(self) -> bool:
        return self.flops is not None and self.bytes is not None

    @property
    def intensity(self) -> float | None:
        if not self.costed or self.bytes <= 0:
            return None
        return self.flops / self.bytes

    @property
    def flops_per_s(self) -> float | None:
        return self.flops / self.time_s if self.costed and self.time_s > 0 else None

    @property
    def bytes_per_s(self) -> float | None:
        return self.bytes / self.time_s if self.costed and self.time_s > 0 else None

    @property
    def of_roof(self) -> float | None:
        if self.at_roof_s is None or self.time_s <= 0:
            return None
        return self.at_roof_s / self.time_s

    @property
    def plottable(self) -> bool:
        """Whether it has a place on a log-log roofline (FLOPs and bytes above zero)."""
        return (self.costed and self.flops > 0 and self.bytes > 0 and self.time_s > 0)


def _note(op: StepOp) -> str:
    if op.costed:
        return ""
    return FUSED_NOTE if is_fused_kernel(op.name) else UNCOSTED_NOTE


def step_rows(series: str, ops: Iterable[StepOp], roof: Roof) -> list[OpRow]:
    """One row per op name and shapes of a profiled step (calls summed), most time first. A
    group with any call not costed is not costed."""
    groups: dict[tuple[str, str], list[StepOp]] = {}
    for op in ops:
        groups.setdefault((op.name, op.shapes), []).append(op)
    rows = []
    for (name, shapes), calls in groups.items():
        costed = all(op.costed for op in calls)
        rows.append(OpRow(
            series=series, name=name, shapes=shapes, calls=len(calls),
            time_s=sum(op.dur_s for op in calls),
            flops=sum(op.flops for op in calls) if costed else None,
            bytes=sum(op.bytes for op in calls) if costed else None,
            at_roof_s=sum(roof.time_s(op) for op in calls) if costed else None,
            note=_note(calls[0])))
    rows.sort(key=lambda r: (-r.time_s, r.name, r.shapes))
    return rows


def trace_rows(points: Iterable[OpPoint], series: str = "trace") -> list[OpRow]:
    """A trace's ops on a roof as rows, in its order (most time first)."""
    return [OpRow(series=series, name=p.name, shapes=p.shapes, calls=p.calls, time_s=p.time_s,
                  flops=p.flops, bytes=p.bytes, at_roof_s=p.at_roof_s,
                  peak_dtype=p.peak_dtype,
                  note="" if p.peak_dtype == p.dtype else
                  f"{p.dtype}: set against the {p.peak_dtype} peak")
            for p in points]
