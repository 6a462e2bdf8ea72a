"""The batching lab's snapshot record: everything the lab draws from a snapshot, read once.

The per-iteration and per-request records are engines/serve's (`IterationRecord`,
`RequestInfo`); the Compare and Rate sweep tabs' are compare_records.py's (`PolicyRun`,
`SweepPoint`).
"""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.labs.batching.compare_records import PolicyRun, SweepPoint
from inferlab.engines.serve.records import IterationRecord, RequestInfo


@dataclass(frozen=True)
class BatchingSnapshot:
    """`labs.batching` read back (section.read_batching_section).

    settings     the run's settings, checked (settings.check_batching_settings)
    requests     one RequestInfo per request, arrival order; () when no run was kept
    iterations   the kept IterationRecords (every k-th of a huge run, and the last)
    metrics      the run's metrics dict (session.batching_metrics' keys)
    comparison   the Compare tab's two PolicyRuns (A, B), or ()
    sweep        the Rate sweep tab's SweepPoints, or ()
    """

    settings: dict
    requests: tuple[RequestInfo, ...]
    iterations: tuple[IterationRecord, ...]
    metrics: dict
    comparison: tuple[PolicyRun, ...] = ()
    sweep: tuple[SweepPoint, ...] = ()

    @property
    def has_run(self) -> bool:
        """Whether the snapshot holds a run to replay (a section may hold only a comparison)."""
        return bool(self.requests)
