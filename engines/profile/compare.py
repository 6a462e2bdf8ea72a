"""Two traces compared op by op: per name at the level both share (GPU kernels where either
has any, else CPU ops), each one's calls and summed time, and B / A.

    b_over_a = total_b_s / total_a_s    (inf: a name only B ran; 0: only A)

Rows come largest change of time first, so what got slower or faster leads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inferlab.engines.profile.chrome_trace import TraceEvent
from inferlab.engines.profile.kernel_table import kernel_table, level_of


@dataclass(frozen=True)
class CompareRow:
    name: str
    calls_a: int
    calls_b: int
    total_a_s: float
    total_b_s: float

    @property
    def b_over_a(self) -> float:
        if self.total_a_s > 0:
            return self.total_b_s / self.total_a_s
        return float("inf") if self.total_b_s > 0 else 1.0

    def to_dict(self) -> dict:
        return {"calls_a": self.calls_a, "calls_b": self.calls_b, "total_a_s": self.total_a_s,
                "total_b_s": self.total_b_s, "b_over_a": self.b_over_a}


def shared_level(a: Sequence[TraceEvent], b: Sequence[TraceEvent]) -> str:
    return "gpu" if "gpu" in (level_of(a), level_of(b)) else "cpu"


def compare_traces(a: Sequence[TraceEvent], b: Sequence[TraceEvent],
                   level: str | None = None) -> list[CompareRow]:
    """One row per name either trace ran at `level` (default: `shared_level`)."""
    level = level or shared_level(a, b)
    rows_a = {r.name: r for r in kernel_table(a, level)}
    rows_b = {r.name: r for r in kernel_table(b, level)}
    rows = []
    for name in rows_a.keys() | rows_b.keys():
        ra, rb = rows_a.get(name), rows_b.get(name)
        rows.append(CompareRow(name, ra.calls if ra else 0, rb.calls if rb else 0,
                               ra.total_s if ra else 0.0, rb.total_s if rb else 0.0))
    rows.sort(key=lambda r: (-abs(r.total_b_s - r.total_a_s), r.name))
    return rows
