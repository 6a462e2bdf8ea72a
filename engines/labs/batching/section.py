"""The batching lab's snapshot section, `labs.batching`: its writer (`batching_section`) and
its reader (`read_batching_section`, into records.BatchingSnapshot). The section's format:

    settings   the run's settings (settings.py)
    state      requests (RequestInfo dicts), iterations (IterationRecord dicts, every
               `iterations_every`-th and the last), and the Compare and Rate sweep tabs'
               runs (`comparison`, `sweep`: compare_records.comparison_state); no run: none
               of the first three
    metrics    session.batching_metrics' dict
"""

from __future__ import annotations

from inferlab.engines.fields import read_list, read_object, shown
from inferlab.engines.labs.batching.compare_records import (
    read_batching_metrics,
    read_comparison_state,
)
from inferlab.engines.labs.batching.records import BatchingSnapshot
from inferlab.engines.labs.batching.session import batching_metrics
from inferlab.engines.labs.batching.settings import check_batching_settings
from inferlab.engines.serve.metrics import ServingMetrics
from inferlab.engines.serve.records import IterationRecord, RequestInfo
from inferlab.engines.trace.snapshot import lab_section, section_field
from inferlab.engines.trace.thinning import keep_every

ITERATIONS_LIMIT = 50_000
"""A snapshot keeps every iteration up to this many, then every k-th (and the last)."""


def batching_section(settings: dict, requests, iterations, metrics: ServingMetrics | dict,
                     extras: dict | None = None) -> dict:
    """The snapshot's `labs.batching`; huge runs keep every k-th iteration (and the last).
    `extras`: the Compare and Rate sweep results (compare.comparison_state)."""
    if not requests:
        return lab_section(settings, dict(extras or {}), {"iterations": 0})
    n = len(iterations)
    every = keep_every(n, 1, ITERATIONS_LIMIT)
    kept = [r.to_dict() for i, r in enumerate(iterations) if i % every == 0 or i == n - 1]
    state = {"requests": [r.to_dict() for r in requests], "iterations": kept,
             "iterations_every": every, **(extras or {})}
    if isinstance(metrics, ServingMetrics):
        metrics = batching_metrics(metrics, iterations)
    return lab_section(settings, state, metrics)


def read_batching_section(sec: dict) -> BatchingSnapshot:
    """The section read once into its record (records.py); ValueError names a bad field."""
    where = "labs.batching"
    read_object(sec, where)
    settings = check_batching_settings(section_field(sec, "settings", where), f"{where}.settings")
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    metrics = read_batching_metrics(section_field(sec, "metrics", where), f"{where}.metrics")

    comparison, sweep = read_comparison_state(state, f"{where}.state")
    if not {"requests", "iterations", "iterations_every"} & state.keys():  # no run, maybe
        return BatchingSnapshot(settings=settings, requests=(), iterations=(),  # a comparison
                                metrics=metrics, comparison=tuple(comparison),
                                sweep=tuple(sweep))
    w = f"{where}.state"
    requests = read_list(section_field(state, "requests", w), RequestInfo.from_dict,
                         f"{w}.requests")
    iterations = read_list(section_field(state, "iterations", w),
                           IterationRecord.from_dict, f"{w}.iterations")
    ids: set[str] = set()
    for i, r in enumerate(requests):
        if r.request_id in ids:  # the timeline has one row per request
            raise ValueError(f"{w}.requests[{i}].request_id: {shown(r.request_id)} is "
                             f"already the id of an earlier request")
        ids.add(r.request_id)
    for i, it in enumerate(iterations):
        unknown = [rid for rid in (*it.decodes, *(p.request_id for p in it.prefills),
                                   *it.preempted, *it.finished) if rid not in ids]
        if unknown:
            raise ValueError(f"{w}.iterations[{i}]: unknown request {shown(unknown[0])}")
    return BatchingSnapshot(settings=settings, requests=tuple(requests),
                            iterations=tuple(iterations), metrics=metrics,
                            comparison=tuple(comparison), sweep=tuple(sweep))
