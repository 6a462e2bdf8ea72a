"""The batching lab's trace events: each iteration a span on the run's clock with batch-size and
KV-usage counters (`batching_trace_iteration`), and each request's states on its own track
(`batching_trace_requests`: the timeline's segments)."""

from __future__ import annotations

from inferlab.engines.labs.batching.timeline import STATE_NAMES, timeline_segments
from inferlab.engines.serve.records import IterationRecord


def batching_trace_iteration(recorder, record: IterationRecord, offset_s: float = 0.0) -> None:
    """One iteration as a span on the run's clock (shifted by `offset_s`, the recorder's time
    when the run started) plus batch-size and KV-usage counters at its end."""
    start, end = offset_s + record.start_s, offset_s + record.end_s
    recorder.add_span(f"iteration {record.index}", start, end, cat="batching",
                      args={"policy": record.policy, "clock": record.clock,
                            "prefill_tokens": record.prefill_tokens,
                            "decode_tokens": record.decode_tokens,
                            "preempted": len(record.preempted)})
    recorder.counter("batch size", {"sequences": record.batch_size,
                                    "prefill tokens": record.prefill_tokens,
                                    "decode tokens": record.decode_tokens}, ts_s=end,
                     cat="batching")
    recorder.counter("KV usage %", {"used": 100 * record.kv_usage}, ts_s=end, cat="batching")
    if record.clock == "wall":  # the simulated clock times the batch alone: no phases
        t = start
        for phase, seconds in (("schedule", record.schedule_s), ("forward", record.forward_s),
                               ("sample", record.sample_s)):
            recorder.add_span(phase, t, t + seconds, cat="batching")
            t += seconds


def batching_trace_requests(recorder, requests, iterations, offset_s: float = 0.0) -> None:
    """Each request on its own track ("request <id>"): one span per state it was in
    (waiting, prefill, decode, preempted, stalled: the timeline's segments)."""
    segments = timeline_segments(requests, iterations)
    for row, state, start_s, end_s in segments.rows():
        rid = segments.request_ids[row]
        recorder.add_span(STATE_NAMES[state], offset_s + start_s, offset_s + end_s,
                          cat="request", track=f"request {rid}")
