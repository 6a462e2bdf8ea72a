"""The batch timeline's segments, written out by hand for small schedules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.labs.batching.timeline import (
    DECODE,
    PREEMPTED,
    PREFILL,
    STALLED,
    WAITING,
    iteration_strips,
    segment_at,
    synthetic_schedule,
    timeline_segments,
)
from inferlab.engines.serve.records import IterationRecord, PrefillSlice, RequestInfo


def it(k, prefills=(), decodes=(), preempted=(), finished=(), used=4, end=None):
    """Iteration k runs [k, k + 0.9]: 0.1 s of scheduling between iterations."""
    return IterationRecord(
        index=k, policy="continuous", clock="simulated", start_s=float(k),
        end_s=float(k) + 0.9 if end is None else end,
        prefills=tuple(PrefillSlice(*p) for p in prefills), decodes=tuple(decodes),
        preempted=tuple(preempted), finished=tuple(finished), kv_used_blocks=used,
        kv_total_blocks=8, waiting=0, running=len(decodes) + len(prefills))


# C is listed first but arrives last: rows follow arrival, not list order.
REQUESTS = [
    RequestInfo("C", 1.5, 4, 3),
    RequestInfo("A", 0.0, 8, 6),
    RequestInfo("B", 0.5, 12, 3),
]
ITERATIONS = [
    it(0, prefills=[("A", 0, 8)]),                                  # A's whole prompt
    it(1, prefills=[("B", 0, 6)], decodes=["A"]),                   # B's first chunk
    it(2, decodes=["A"]),                                           # B left out: waits
    it(3, prefills=[("B", 6, 6)], decodes=["A"]),                   # B's second chunk
    it(4, prefills=[("C", 0, 4)], decodes=["A", "B"]),              # C admitted at last
    it(5, decodes=["A", "B"], preempted=["C"], finished=["A", "B"], used=8),  # C preempted
    it(6, prefills=[("C", 0, 5)]),                                  # C recomputes 4 + 1
    it(7, decodes=["C"], finished=["C"]),
]


def test_hand_built_schedule_exact_segments():
    seg = timeline_segments(REQUESTS, ITERATIONS)
    assert seg.request_ids == ("A", "B", "C")
    assert seg.rows() == [
        (0, PREFILL, 0.0, 0.9),
        (0, DECODE, 1.0, 5.9),        # five decode iterations: one segment
        (1, WAITING, 0.5, 1.0),       # arrival -> first chunk
        (1, PREFILL, 1.0, 1.9),
        (1, WAITING, 1.9, 3.0),       # between its chunks
        (1, PREFILL, 3.0, 3.9),
        (1, DECODE, 4.0, 5.9),
        (2, WAITING, 1.5, 4.0),
        (2, PREFILL, 4.0, 4.9),
        (2, PREEMPTED, 5.0, 6.0),     # from the preempting iteration to the re-prefill
        (2, PREFILL, 6.0, 6.9),
        (2, DECODE, 7.0, 7.9),
    ]
    assert seg.row.dtype == np.int32 and seg.state.dtype == np.uint8
    assert seg.start_s.dtype == np.float64 and seg.end_s.dtype == np.float64


def test_decodes_left_out_of_prefill_only_iterations_stall():
    requests = [RequestInfo("A", 0.0, 8, 9), RequestInfo("B", 1.2, 8, 2)]
    iterations = [
        it(0, prefills=[("A", 0, 8)]),
        it(1, decodes=["A"]),
        it(2, prefills=[("B", 0, 8)]),  # no-chunking: prefill-only, A's decode waits
        it(3, decodes=["A", "B"], finished=["B"]),
        it(4, decodes=["A"]),
    ]
    assert timeline_segments(requests, iterations).rows() == [
        (0, PREFILL, 0.0, 0.9),
        (0, DECODE, 1.0, 1.9),
        (0, STALLED, 1.9, 3.0),
        (0, DECODE, 3.0, 4.9),        # unfinished: ends with the record
        (1, WAITING, 1.2, 2.0),
        (1, PREFILL, 2.0, 2.9),
        (1, DECODE, 3.0, 3.9),
    ]


def test_a_run_cut_short_ends_open_rows_at_the_last_iteration():
    requests = [RequestInfo("A", 0.0, 8, 99), RequestInfo("B", 0.0, 8, 99),
                RequestInfo("C", 0.5, 8, 99), RequestInfo("D", 9.0, 8, 99)]
    iterations = [
        it(0, prefills=[("A", 0, 8), ("B", 0, 8)]),
        it(1, decodes=["A"], preempted=["B"]),
        it(2, decodes=["A"]),
        it(3, prefills=[("A", 0, 4)], end=3.5),  # a (made-up) re-prefill of A's first chunk
    ]
    assert timeline_segments(requests, iterations).rows() == [
        (0, PREFILL, 0.0, 0.9),
        (0, DECODE, 1.0, 2.9),
        (0, PREFILL, 3.0, 3.5),
        (1, PREFILL, 0.0, 0.9),
        (1, PREEMPTED, 1.0, 3.5),     # never rescheduled
        (2, WAITING, 0.5, 3.5),       # never scheduled; D arrives after the end: no row data
    ]


def test_left_out_before_its_preemption_then_preempted():
    requests = [RequestInfo("A", 0.0, 8, 99), RequestInfo("B", 0.0, 8, 99)]
    iterations = [
        it(0, prefills=[("A", 0, 8), ("B", 0, 8)]),
        it(1, decodes=["A"]),             # B left out
        it(2, decodes=["A"], preempted=["B"]),
        it(3, prefills=[("B", 0, 9)]),
        it(4, decodes=["A", "B"]),
    ]
    rows = timeline_segments(requests, iterations).rows()
    assert [r for r in rows if r[0] == 1] == [
        (1, PREFILL, 0.0, 0.9),
        (1, STALLED, 0.9, 2.0),
        (1, PREEMPTED, 2.0, 3.0),
        (1, PREFILL, 3.0, 3.9),
        (1, DECODE, 4.0, 4.9),
    ]


def test_twenty_thousand_decodes_merge_into_one_segment():
    n = 20_000
    requests = [RequestInfo("A", 0.0, 8, n + 1)]
    iterations = [it(0, prefills=[("A", 0, 8)])] + [
        it(k, decodes=["A"]) for k in range(1, n + 1)]
    seg = timeline_segments(requests, iterations)
    assert seg.rows() == [(0, PREFILL, 0.0, 0.9), (0, DECODE, 1.0, n + 0.9)]


def test_scheduled_on_arrival_has_no_wait_and_merging_stops_at_a_state_change():
    requests = [RequestInfo("A", 0.0, 8, 3)]
    iterations = [it(0, prefills=[("A", 0, 4)]), it(1, prefills=[("A", 4, 4)]),
                  it(2, decodes=["A"]), it(3, decodes=["A"], finished=["A"]), it(4)]
    assert timeline_segments(requests, iterations).rows() == [
        (0, PREFILL, 0.0, 1.9), (0, DECODE, 2.0, 3.9)]


def test_empty_inputs():
    assert len(timeline_segments([], [])) == 0
    assert len(timeline_segments(REQUESTS, [])) == 0
    assert len(timeline_segments([], [it(0)])) == 0
    strips = iteration_strips([])
    assert strips.end_s.shape == (0,) and strips.batch_size.shape == (0,)


def test_unknown_and_duplicate_request_ids_are_refused():
    with pytest.raises(ValueError, match="'Z'"):
        timeline_segments(REQUESTS, [it(0, decodes=["Z"])])
    with pytest.raises(ValueError, match="unique"):
        timeline_segments([RequestInfo("A", 0.0, 1, 1)] * 2, [])


def test_segment_lookup_by_row_and_time():
    seg = timeline_segments(REQUESTS, ITERATIONS)
    i = segment_at(seg, 2, 5.5)
    assert (int(seg.row[i]), int(seg.state[i])) == (2, PREEMPTED)
    assert segment_at(seg, 0, 0.95) is None  # the gap between two iterations
    assert segment_at(seg, 1, 0.2) is None  # before B arrived
    assert segment_at(seg, 7, 1.0) is None
    assert seg.state[segment_at(seg, 1, 1.0)] == PREFILL  # a boundary belongs to the later


def test_iteration_strips():
    s = iteration_strips(ITERATIONS)
    np.testing.assert_array_equal(s.end_s, np.arange(8) + 0.9)
    assert s.batch_size.tolist() == [1, 2, 1, 2, 3, 2, 1, 1]
    assert s.prefill_tokens.tolist() == [8, 6, 0, 6, 4, 0, 5, 0]
    assert s.decode_tokens.tolist() == [0, 1, 1, 1, 2, 2, 0, 1]
    assert s.kv_usage.tolist() == [0.5] * 5 + [1.0, 0.5, 0.5]
    assert s.preemptions.tolist() == [0, 0, 0, 0, 0, 1, 0, 0]


def test_synthetic_schedule_is_consistent_with_its_segments():
    requests, iterations = synthetic_schedule(60, seed=0)
    seg = timeline_segments(requests, iterations)
    assert (seg.state == PREEMPTED).sum() == sum(len(i.preempted) for i in iterations) > 0
    assert np.all(seg.end_s >= seg.start_s)
    finished = {rid for i in iterations for rid in i.finished}
    assert finished == {r.request_id for r in requests}
    # segments of one row never overlap
    same = seg.row[1:] == seg.row[:-1]
    assert np.all(seg.start_s[1:][same] >= seg.end_s[:-1][same])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(1, 40), cuts=st.lists(st.integers(1, 60),
                                                                      max_size=12))
def test_a_builder_extended_in_pieces_gives_the_segments_of_the_whole(seed, n, cuts):
    import random

    from inferlab.engines.labs.batching.timeline import TimelineBuilder

    rng = random.Random(seed)
    requests, iterations = synthetic_schedule(
        n, max_iterations=300, kv_blocks=rng.randint(20, 60), max_running=rng.randint(1, 8),
        seed=seed)
    builder = TimelineBuilder(requests)
    done = 0
    for cut in cuts:
        builder.extend(iterations[done: done + cut])
        done = min(done + cut, len(iterations))
        assert builder.segments().rows() == timeline_segments(requests, iterations[:done]).rows()
    builder.extend(iterations[done:])
    assert builder.segments().rows() == timeline_segments(requests, iterations).rows()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(1, 60), chunked=st.booleans(),
       cuts=st.lists(st.tuples(st.integers(1, 80), st.booleans()), max_size=16))
def test_kept_segments_of_finished_requests_equal_a_full_rebuild(seed, n, chunked, cuts):
    """The builder keeps the segments of finished requests between calls; read after random
    batches of records (segments() called after some of them only), it gives the segments a
    fresh builder gives for the same records: rows, states and times, in order and dtype."""
    import random

    from inferlab.engines.labs.batching.timeline import TimelineBuilder

    rng = random.Random(seed)
    requests, iterations = synthetic_schedule(
        n, max_iterations=400, kv_blocks=rng.randint(12, 80), max_running=rng.randint(1, 10),
        token_budget=64 if chunked else 4096, seed=seed)
    builder = TimelineBuilder(requests)
    done = 0
    for cut, read in [*cuts, (len(iterations), True)]:
        builder.extend(iterations[done: done + cut])
        done = min(done + cut, len(iterations))
        if not read:
            continue
        got = builder.segments()
        fresh = TimelineBuilder(requests)
        fresh.extend(iterations[:done])
        want = fresh.segments()
        assert got.rows() == want.rows()
        for name in ("row", "state", "start_s", "end_s"):
            assert getattr(got, name).dtype == getattr(want, name).dtype


def test_a_record_naming_a_finished_request_again_rebuilds_its_segments():
    """Our schedulers never name a request after its finish; a made-up record that does is
    drawn as the whole records are, not from the segments kept at its finish."""
    from inferlab.engines.labs.batching.timeline import TimelineBuilder

    requests = [RequestInfo("A", 0.0, 8, 2), RequestInfo("B", 0.0, 8, 9)]
    records = [it(0, prefills=[("A", 0, 8), ("B", 0, 8)]),
               it(1, decodes=["A", "B"], finished=["A"]),
               it(2, decodes=["B"]),
               it(3, decodes=["A", "B"]),
               it(4, decodes=["B"])]
    builder = TimelineBuilder(requests)
    for k, record in enumerate(records):
        builder.extend([record])
        assert builder.segments().rows() == timeline_segments(requests, records[: k + 1]).rows()
    assert [r for r in builder.segments().rows() if r[0] == 0] == [
        (0, PREFILL, 0.0, 0.9), (0, DECODE, 1.0, 1.9), (0, STALLED, 1.9, 3.0),
        (0, DECODE, 3.0, 3.9)]
