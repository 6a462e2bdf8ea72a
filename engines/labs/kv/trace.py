"""A KV step as trace events: its span and both allocators' counters."""

from __future__ import annotations

from inferlab.engines.labs.kv.records import KVStepRecord


def kv_trace_step(recorder, record: KVStepRecord, end_s: float | None = None) -> None:
    """One KV step as a span ("kv step N", ending now) plus counters of both allocators."""
    end = recorder.now_s() if end_s is None else end_s
    recorder.add_span(f"kv step {record.step}", end - record.step_s, end, cat="kv",
                      args={"ran_model": record.ran_model, "events": len(record.events)})
    p, c = record.paged, record.contiguous
    recorder.counter("kv reserved slots", {"paged": p.slots_reserved,
                                           "contiguous": c.slots_reserved}, ts_s=end, cat="kv")
    recorder.counter("kv waste %", {"paged": 100 * p.waste_frac,
                                    "contiguous": 100 * c.waste_frac}, ts_s=end, cat="kv")
