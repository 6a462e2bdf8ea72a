"""What `profile open` and the step lab's Trace tab show of a user's torch.profiler trace, as
one record: the kernel or op table, the time per stream or thread (compute, memory,
communication, idle) and, given a roof, the ops with recorded shapes on it."""

from __future__ import annotations

import os
from dataclasses import dataclass

from inferlab.engines.profile.breakdown import LaneTime, breakdown
from inferlab.engines.profile.chrome_trace import Progress, read_chrome_trace
from inferlab.engines.profile.kernel_table import KernelRow, kernel_table, level_of
from inferlab.engines.profile.op_roofline import OpPoint, Roof, op_points


@dataclass(frozen=True)
class TraceProfile:
    path: str
    bytes_read: int
    events: int  # complete events
    level: str  # "gpu" (kernels, copies) or "cpu" (ops)
    kernels: tuple[KernelRow, ...]  # most time first
    lanes: tuple[LaneTime, ...]
    roof: Roof | None
    ops: tuple[OpPoint, ...]  # () without a roof

    def to_dict(self) -> dict:
        out = {"path": self.path, "bytes": self.bytes_read, "events": self.events,
               "level": self.level, "kernels": {r.name: r.to_dict() for r in self.kernels},
               "breakdown": {lane.key: lane.to_dict() for lane in self.lanes}}
        if self.roof is not None:
            out["roofline"] = {"roof": self.roof.to_dict(), "ops": [p.to_dict() for p in self.ops]}
        return out


def profile_trace(path: str | os.PathLike, roof: Roof | None = None,
                  progress: Progress | None = None) -> TraceProfile:
    """The trace at `path` read (TraceReadError for one that is not a whole, well-typed
    trace) and summed up."""
    trace = read_chrome_trace(path, progress=progress)
    level = level_of(trace.events)
    ops = () if roof is None else tuple(op_points(trace.events, roof))
    return TraceProfile(trace.path, trace.bytes_read, len(trace.events), level,
                        tuple(kernel_table(trace.events, level)),
                        tuple(breakdown(trace.events, trace.thread_names, level)), roof, ops)
