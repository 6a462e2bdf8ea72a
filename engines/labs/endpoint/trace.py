"""The endpoint lab's trace events: each request on its own track ("request r0007"): a
"waiting" span from send to the first token, a "streaming" span from there to the last chunk,
and the failure, if any, as the span's argument; the scraped common series as counters."""

from __future__ import annotations

import numpy as np

from inferlab.engines.labs.endpoint.records import EndpointRecord
from inferlab.engines.labs.endpoint.timeline import SEGMENT_NAMES, request_segments


def endpoint_trace(recorder, record: EndpointRecord, offset_s: float = 0.0) -> None:
    """Each request on its own track (waiting / streaming spans, a failure named in its
    args), and the scraped common series as counters; times shifted by `offset_s`."""
    seg = request_segments(record.results)
    by_row = record.results
    for row, state, a, b in seg.rows():
        r = by_row[row]
        args = {"output_tokens": r.output_tokens, "chunks": len(r.chunk_times_s)}
        if r.error is not None:
            args["error"] = r.error
        recorder.add_span(SEGMENT_NAMES.get(state, "request"), offset_s + a, offset_s + b,
                          cat="endpoint", args=args, track=f"request {seg.request_ids[row]}")
    for key, pts in record.scrape.common.items():
        for t, v in np.asarray(pts).reshape(-1, 2):
            recorder.counter(f"server {key}", {key: float(v)}, ts_s=offset_s + float(t),
                             cat="endpoint")
