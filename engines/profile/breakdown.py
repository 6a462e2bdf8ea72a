"""Where each stream's or thread's time went: compute, memory, communication, idle.

Holistic Trace Analysis's split. An event is *communication* when its name says NCCL or gloo
or a collective (all_reduce, all_gather, reduce_scatter, all_to_all, c10d::...), else *memory*
when it is a copy or a fill (cat gpu_memcpy / gpu_memset, names Memcpy / Memset), else
*compute*. Per lane (a GPU stream's pid / tid where the trace has GPU work, else a CPU thread
running cpu_ops), over the span from its first event's start to its last event's end:

    communication_s = |∪ comm|
    memory_s        = |∪ (comm ∪ memory)| − |∪ comm|
    compute_s       = |∪ all| − |∪ (comm ∪ memory)|
    idle_s          = span − |∪ all|

Overlapping and nested events count once (the union of their intervals), a moment goes to the
first category above that covers it, and the four add up to the span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferlab.engines.profile.chrome_trace import TraceEvent
from inferlab.engines.profile.kernel_table import level_events, level_of

COMMUNICATION_WORDS = ("nccl", "gloo", "all_reduce", "allreduce", "all_gather", "allgather",
                       "reduce_scatter", "reducescatter", "all_to_all", "alltoall", "c10d::",
                       "record_param_comms", "sendrecv")
MEMORY_CATS = frozenset({"gpu_memcpy", "gpu_memset"})
MEMORY_WORDS = ("memcpy", "memset")


def category(event: TraceEvent) -> str:
    """"communication", "memory" or "compute"."""
    name = event.name.lower()
    if any(word in name for word in COMMUNICATION_WORDS):
        return "communication"
    if event.cat in MEMORY_CATS or any(word in name for word in MEMORY_WORDS):
        return "memory"
    return "compute"


def covered_us(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals, sorted by start."""
    total = 0.0
    cur_start = cur_end = None
    for start, end in intervals:
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_end is not None:
        total += cur_end - cur_start
    return total


@dataclass(frozen=True)
class LaneTime:
    pid: int | str
    tid: int | str
    name: str  # the thread's or stream's name in the trace, else "pid/tid"
    kind: str  # "stream" (GPU) or "thread" (CPU)
    events: int
    span_s: float  # first event's start to last event's end
    compute_s: float
    memory_s: float
    communication_s: float
    idle_s: float

    @property
    def key(self) -> str:
        return f"{self.pid}/{self.tid}"

    def to_dict(self) -> dict:
        return {"pid": self.pid, "tid": self.tid, "name": self.name, "kind": self.kind,
                "events": self.events, "span_s": self.span_s, "compute_s": self.compute_s,
                "memory_s": self.memory_s, "communication_s": self.communication_s,
                "idle_s": self.idle_s}


def _lane_order(key: tuple) -> tuple:
    return tuple((0, v, "") if isinstance(v, int) else (1, 0, v) for v in key)


def breakdown(events: Sequence[TraceEvent], thread_names: Mapping | None = None,
              level: str | None = None) -> list[LaneTime]:
    """One `LaneTime` per GPU stream (where the trace has GPU work) or CPU thread."""
    level = level or level_of(events)
    names = thread_names or {}
    lanes: dict[tuple, list[TraceEvent]] = {}
    for e in level_events(events, level):
        lanes.setdefault((e.pid, e.tid), []).append(e)
    out = []
    for key in sorted(lanes, key=_lane_order):
        lane = sorted(lanes[key], key=lambda e: e.ts_us)
        spans = [(e.ts_us, e.end_us, category(e)) for e in lane]
        comm = covered_us([(s, t) for s, t, c in spans if c == "communication"])
        comm_mem = covered_us([(s, t) for s, t, c in spans if c != "compute"])
        busy = covered_us([(s, t) for s, t, _ in spans])
        span = max(t for _, t, _ in spans) - lane[0].ts_us
        out.append(LaneTime(
            pid=key[0], tid=key[1], name=names.get(key, f"{key[0]}/{key[1]}"),
            kind="stream" if level == "gpu" else "thread", events=len(lane),
            span_s=span / 1e6, compute_s=(busy - comm_mem) / 1e6,
            memory_s=(comm_mem - comm) / 1e6, communication_s=comm / 1e6,
            idle_s=(span - busy) / 1e6))
    return out
