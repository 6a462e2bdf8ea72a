"""The kernel and op table: per name, how often it ran and how much of the time it took.

The level is the trace's lowest that was recorded: GPU work (kernels, memcpys and memsets,
as Holistic Trace Analysis counts them) where the trace has any, else the CPU ops (cat
"cpu_op"). A name's `share` is its summed time over the summed time of every event of that
level; nested CPU ops (aten::linear holding aten::addmm) are each counted whole, as in
torch.profiler's own table, so shares are of the level's summed time, not of the wall time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from inferlab.engines.profile.chrome_trace import TraceEvent

GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
CPU_CATS = frozenset({"cpu_op"})


def level_of(events: Iterable[TraceEvent]) -> str:
    """"gpu" where any event ran on the GPU, else "cpu"."""
    return "gpu" if any(e.cat in GPU_CATS for e in events) else "cpu"


def level_events(events: Sequence[TraceEvent], level: str | None = None) -> list[TraceEvent]:
    """The events of `level` (default: `level_of(events)`)."""
    cats = GPU_CATS if (level or level_of(events)) == "gpu" else CPU_CATS
    return [e for e in events if e.cat in cats]


@dataclass(frozen=True)
class KernelRow:
    name: str
    calls: int
    total_s: float
    mean_s: float
    share: float  # of the summed time of every event of the level

    def to_dict(self) -> dict:
        return {"calls": self.calls, "total_s": self.total_s, "mean_s": self.mean_s,
                "share": self.share}


def kernel_table(events: Sequence[TraceEvent], level: str | None = None) -> list[KernelRow]:
    """One row per name at `level` (default: GPU where there is any), most time first."""
    calls: dict[str, int] = {}
    total_us: dict[str, float] = {}
    for e in level_events(events, level):
        calls[e.name] = calls.get(e.name, 0) + 1
        total_us[e.name] = total_us.get(e.name, 0.0) + e.dur_us
    whole_us = sum(total_us.values())
    rows = [KernelRow(name, calls[name], t / 1e6, t / 1e6 / calls[name],
                      t / whole_us if whole_us > 0 else 0.0)
            for name, t in total_us.items()]
    rows.sort(key=lambda r: (-r.total_s, r.name))
    return rows
