"""The endpoint lab's timeline: a run's requests as the batching lab's Gantt segments, as the
client saw them (waiting from the send to the first token, then streaming to the last chunk;
a failure or a cancel named), drawn by views/endpoint_timeline.py and written as the trace's
spans (trace.py)."""

from __future__ import annotations

import numpy as np

from inferlab.engines.labs.batching.timeline import (
    DECODE,
    PREEMPTED,
    STALLED,
    WAITING,
    TimelineSegments,
)


def request_segments(results) -> TimelineSegments:
    """The client-side Gantt of a run as the batching lab's TimelineSegments: per request
    (row = its index in the workload) WAITING from send to the first token, DECODE
    ("streaming") from the first token to the last chunk; a failed request's whole span is
    PREEMPTED (drawn as "failed"), a cancelled one's STALLED (drawn as "cancelled")."""
    ids = tuple(f"r{r.index:04d}" for r in results)
    rows, states, starts, ends = [], [], [], []
    for row, r in enumerate(results):
        if r.error_kind == "cancelled" or (not r.ok and not r.chunk_times_s):
            state = STALLED if r.error_kind == "cancelled" else PREEMPTED
            rows.append(row), states.append(state), starts.append(r.send_s)
            ends.append(r.end_s)
            continue
        first = r.chunk_times_s[0] if r.chunk_times_s else r.end_s
        last = r.chunk_times_s[-1] if r.chunk_times_s else r.end_s
        rows.append(row), states.append(WAITING), starts.append(r.send_s), ends.append(first)
        rows.append(row), states.append(DECODE), starts.append(first), ends.append(last)
        if not r.ok:  # failed mid-stream: the rest of its span, to the failure
            rows.append(row), states.append(PREEMPTED), starts.append(last)
            ends.append(max(last, r.end_s))
    return TimelineSegments(np.array(rows, np.int32), np.array(states, np.uint8),
                            np.array(starts, np.float64), np.array(ends, np.float64),
                            ids, {rid: i for i, rid in enumerate(ids)})


SEGMENT_NAMES = {WAITING: "waiting", DECODE: "streaming", PREEMPTED: "failed",
                 STALLED: "cancelled"}
"""What each segment state is called in the endpoint lab (the trace's span names)."""
