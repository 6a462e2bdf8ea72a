"""The trace view draws a TraceStats record built by hand: one bar item per histogram, the
log2 bins where their lengths fall, the arrivals as one step curve, labels with units."""

from __future__ import annotations

import numpy as np

from inferlab.engines.serve.traces.stats import TraceStats
from inferlab.views.trace_view import ZERO_AT, TraceView, log2_bars, power_of_two_label


def _stats(**kw) -> TraceStats:
    base = dict(requests=6, requests_empty=1, duration_s=3.5, input_tokens=9000,
                output_tokens=600, bin_s=1.0, arrivals_per_bin=(2, 0, 3, 1),
                input_hist=(1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 3),  # 0, 1k-2k, 2k-4k
                output_hist=(0, 0, 0, 0, 0, 0, 0, 6), block_size=512, blocks=5,
                block_refs=9, reuse_hist=(0, 3, 1, 1), sessions=3, turns_hist=(0, 1, 0, 2))
    return TraceStats(**(base | kw))


def test_draws_each_panel_from_the_record(qtbot):
    view = TraceView()
    qtbot.addWidget(view)
    view.show_stats(_stats(), "m.jsonl (mooncake)")
    x, y = view.arrivals.getData()
    assert list(x) == [0, 1, 2, 3, 4] and list(y) == [2, 0, 3, 1]
    o = view.input_bars.opts
    assert list(o["x0"]) == [ZERO_AT - 0.25, 10, 11] and list(o["x1"]) == [ZERO_AT + 0.25, 11, 12]
    assert list(o["height"]) == [1, 2, 3]
    assert list(view.output_bars.opts["x0"]) == [6] and list(view.output_bars.opts["height"]) == [6]
    r = view.reuse_bars.opts  # 3 ids in 1 request, 1 in 2-3, 1 in 4-7; heights to log10(count)
    assert list(r["x0"]) == [0, 1, 2]
    assert np.allclose(np.asarray(r["y0"]) + np.asarray(r["height"]), np.log10([3, 1, 1]))
    t = view.turns_bars.opts
    assert list(t["x0"]) == [0.6, 2.6] and list(t["height"]) == [1, 2]
    text = view.summary.text()
    assert "6 requests over 3.5 s" in text and "5 distinct blocks of 512 tokens" in text
    assert "6 of 9 block references shared" in text and "3 sessions" in text
    labels = {name: p.getPlotItem().getAxis("bottom").labelText for name, p in (
        ("arrivals", view.arrivals_plot), ("input", view.input_plot),
        ("reuse", view.reuse_plot), ("turns", view.turns_plot))}
    assert labels["arrivals"] == "time from first arrival (s)"
    assert labels["input"] == "prompt tokens (log2 bins)"
    assert view.arrivals_plot.getPlotItem().getAxis("left").labelText == "requests / s"


def test_a_trace_without_blocks_or_sessions_says_so(qtbot):
    view = TraceView()
    qtbot.addWidget(view)
    view.show_stats(_stats(block_size=0, blocks=0, block_refs=0, reuse_hist=(), sessions=0,
                           turns_hist=(), bin_s=4.0, arrivals_per_bin=(8,)))
    assert view.empty_notes["reuse"].textItem.toPlainText() == "this trace names no block ids"
    assert view.empty_notes["turns"].textItem.toPlainText() == "this trace names no sessions"
    assert len(view.reuse_bars.opts["x0"]) == 0
    assert list(view.arrivals.getData()[1]) == [2.0]  # 8 requests in a 4-s bin
    assert "4-s bins" in view.arrivals_plot.getPlotItem().getAxis("left").labelText
    view.show_stats(None)
    assert view.summary.text() == "" and len(view.input_bars.opts["x0"]) == 0


def test_log2_helpers():
    x0, x1, h = log2_bars((0, 4, 0, 2))
    assert list(x0) == [0, 2] and list(x1) == [1, 3] and list(h) == [4, 2]
    assert [power_of_two_label(k) for k in (0, 9, 10, 12, 17, 20)] == [
        "1", "512", "1k", "4k", "128k", "1M"]
