"""A step's time split three ways on a measured roof: at the roof, lost inside ops, between ops.

With ops i (top-level: none nested in another) of time t_i, FLOPs F_i and bytes B_i, a roof of
peak P FLOP/s and bandwidth W bytes/s, and the step's wall time T:

    roof_i        = max(F_i / P, B_i / W)           the op's own bound (0 where not costed)
    at_roof_s     = Σ min(t_i, roof_i)              an op faster than its roof counts its time
    busy_s        = |∪ [start_i, end_i]|            the time some op is running
    inside_ops_s  = busy_s − at_roof_s              below the roof, inside ops
    between_ops_s = T − busy_s                      dispatch, launch, Python, gaps

The three add up to T and none is negative. An op can beat its roof when the roof is measured
below what a cache-resident op reaches (a small GEMV whose weights sit in L2 reads faster than
the DRAM copy rate): its time is clipped to its roof, and `beats_roof` counts such ops. On one
thread top-level ops do not overlap, so busy_s = Σ t_i; where they do (streams), the union
keeps the parts from counting twice (at_roof_s is then capped at busy_s).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inferlab.engines.profile.breakdown import covered_us
from inferlab.engines.profile.step_ops import StepOp
from inferlab.engines.roofline.formulas import predicted_time_s


@dataclass(frozen=True)
class Roof:
    """The roof the ops are placed under: peak FLOP/s and bandwidth (bytes/s) of a device."""

    device: str
    peak_flops: float
    bw_bytes_per_s: float

    def time_s(self, op: StepOp) -> float:
        """The op's own bound, max(F / P, B / W); 0 for an op not costed."""
        if not op.costed:
            return 0.0
        return float(predicted_time_s(op.flops, op.bytes, self.peak_flops, self.bw_bytes_per_s))


@dataclass(frozen=True)
class StepSplit:
    """`step_s` = `at_roof_s` + `inside_ops_s` + `between_ops_s` (see the module docstring);
    `ops_s` = Σ t_i, `busy_s` their union, `beats_roof` ops faster than their bound."""

    step_s: float
    ops_s: float
    busy_s: float
    at_roof_s: float
    inside_ops_s: float
    between_ops_s: float
    beats_roof: int

    @property
    def between_ops_share(self) -> float:
        return self.between_ops_s / self.step_s if self.step_s > 0 else 0.0


def split_step(step_s: float, ops: Sequence[StepOp], roof: Roof) -> StepSplit:
    """The split of a step of `step_s` seconds whose top-level `ops` ran inside it (their
    intervals are clipped to [0, step_s])."""
    if step_s < 0:
        raise ValueError(f"step_s must be >= 0, got {step_s}")
    spans = sorted((min(max(op.start_s, 0.0), step_s), min(max(op.end_s, 0.0), step_s))
                   for op in ops)
    busy = min(covered_us(spans), step_s)
    at_roof, beats = 0.0, 0
    for op in ops:
        bound = roof.time_s(op)
        if op.dur_s < bound:
            beats += 1
        at_roof += min(op.dur_s, bound)
    at_roof = min(at_roof, busy)
    return StepSplit(step_s=step_s, ops_s=sum(op.dur_s for op in ops), busy_s=busy,
                     at_roof_s=at_roof, inside_ops_s=busy - at_roof,
                     between_ops_s=step_s - busy, beats_roof=beats)
