"""Trace statistics against hand-worked examples (engines/serve/traces/stats.py)."""

from __future__ import annotations

import pytest

from inferlab.engines.serve.traces import stats
from inferlab.engines.serve.traces.record import TraceRequest as R
from inferlab.engines.serve.traces.stats import TraceStatsCounter, length_bin_edges, trace_stats


def test_hand_worked_mooncake_like():
    # arrivals 0.0, 0.5, 0.99 | 1.0 | (none in 2 s) | 3.2  -> bins [3, 1, 0, 1]
    # inputs 1000, 600, 512, 0, 1  -> bit lengths 10, 10, 10, 0, 1
    # outputs 5, 8, 1, 3, 0        -> bit lengths 3, 4, 1, 2, 0
    # ids: A=[1,2] B=[1,2,3] C=[1] D=[] E=[4,4]: id 1 in 3 requests, 2 in 2, 3 in 1, 4 in 1
    records = [R(0.0, 1000, 5, (1, 2), 512), R(0.5, 600, 8, (1, 2, 3), 512),
               R(0.99, 512, 1, (1,), 512), R(1.0, 0, 3), R(3.2, 1, 0, (4, 4), 512)]
    s = trace_stats(records)
    assert s.requests == 5 and s.requests_empty == 2
    assert s.duration_s == 3.2
    assert s.input_tokens == 2113 and s.output_tokens == 17
    assert s.bin_s == 1.0 and s.arrivals_per_bin == (3, 1, 0, 1)
    assert s.arrivals_per_s == (3.0, 1.0, 0.0, 1.0)
    assert s.input_hist == (1, 1) + (0,) * 8 + (3,)  # bins 0, 1 and 10
    assert s.output_hist == (1, 1, 1, 1, 1)
    # sharing counts 3, 2, 1, 1 -> bit lengths 2, 2, 1, 1
    assert s.block_size == 512 and s.blocks == 4 and s.block_refs == 7
    assert s.reuse_hist == (0, 2, 2)
    assert s.shared_block_refs == 5
    assert s.sessions == 0 and s.turns_hist == ()
    assert s.mean_rate_per_s == pytest.approx(5 / 3.2)


def test_sessions_and_turns():
    # sessions 7: 3 requests, 8: 1, 9: 3, 10: 2; one request with no session
    sessions = [7, 8, 7, 9, 9, None, 7, 10, 9, 10]
    s = trace_stats(R(0.1 * i, 10, 10, session=x, turn=1) for i, x in enumerate(sessions))
    assert s.sessions == 4
    assert s.turns_hist == (0, 1, 1, 2)
    assert s.blocks == 0 and s.reuse_hist == ()


def test_length_bins():
    assert length_bin_edges(4) == (0, 1, 2, 4, 8)
    # 2^(k-1) ≤ n < 2^k is bin k
    for n, k in ((0, 0), (1, 1), (2, 2), (3, 2), (4, 3), (511, 9), (512, 10), (1023, 10)):
        s = trace_stats([R(0.0, n, 1)])
        assert s.input_hist[k] == 1 and sum(s.input_hist) == 1


def test_empty():
    s = trace_stats([])
    assert s.requests == 0 and s.arrivals_per_bin == () and s.duration_s == 0.0
    assert s.mean_rate_per_s == 0.0 and s.shared_block_refs == 0


def test_arrival_bins_coarsen(monkeypatch):
    monkeypatch.setattr(stats, "MAX_ARRIVAL_BINS", 4)
    # 1-s bins [1, 1, 0, 1] then an arrival at 5.5 s: 2-s bins [2, 1, 1]
    s = trace_stats([R(0.2, 1, 1), R(1.5, 1, 1), R(3.0, 1, 1), R(5.5, 1, 1)])
    assert s.bin_s == 2.0 and s.arrivals_per_bin == (2, 1, 1)
    assert s.arrivals_per_s == (1.0, 0.5, 0.5)
    # 9 s needs 4-s bins: [3, 1, 1]... 9 // 4 = 2
    s = trace_stats([R(0.2, 1, 1), R(1.5, 1, 1), R(3.0, 1, 1), R(9.0, 1, 1)])
    assert s.bin_s == 4.0 and s.arrivals_per_bin == (3, 0, 1)


def test_tracked_ids_bounded(monkeypatch):
    monkeypatch.setattr(stats, "MAX_TRACKED", 2)
    c = TraceStatsCounter()
    for r in (R(0, 1, 1, (1, 2), 16, 5), R(0, 1, 1, (3, 1), 16, 6), R(0, 1, 1, (2,), 16, 7),
              R(0, 1, 1, (), 0, 5)):
        c.add(r)
    s = c.result()
    assert s.blocks == 2 and s.blocks_untracked == 1 and s.reuse_hist == (0, 0, 2)
    assert s.sessions == 2 and s.sessions_untracked == 1 and s.turns_hist == (0, 1, 1)
