"""The batch timeline view, offscreen: one item per state, data straight from the segments."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pyqtgraph.exporters as exporters
import pytest

from inferlab.engines.labs.batching.timeline import (
    DECODE,
    PREEMPTED,
    PREFILL,
    STATE_NAMES,
    synthetic_schedule,
    timeline_segments,
)
from inferlab.engines.serve.records import IterationRecord, PrefillSlice, RequestInfo
from inferlab.views.batch_timeline import BAR_HEIGHT, BatchTimelineView, PeakBins


def _it(k, prefills=(), decodes=(), preempted=(), finished=(), clock="simulated"):
    return IterationRecord(
        index=k, policy="continuous", clock=clock, start_s=float(k), end_s=k + 0.9,
        prefills=tuple(PrefillSlice(*p) for p in prefills), decodes=tuple(decodes),
        preempted=tuple(preempted), finished=tuple(finished), kv_used_blocks=3,
        kv_total_blocks=8, waiting=0, running=1)


REQUESTS = [RequestInfo("A", 0.0, 8, 6), RequestInfo("B", 0.5, 12, 3),
            RequestInfo("C", 1.5, 4, 3)]
ITERATIONS = [
    _it(0, prefills=[("A", 0, 8)]),
    _it(1, prefills=[("B", 0, 6)], decodes=["A"]),
    _it(2, decodes=["A"]),
    _it(3, prefills=[("B", 6, 6)], decodes=["A"]),
    _it(4, prefills=[("C", 0, 4)], decodes=["A", "B"]),
    _it(5, decodes=["A", "B"], preempted=["C"], finished=["A", "B"]),
    _it(6, prefills=[("C", 0, 5)]),
    _it(7, decodes=["C"], finished=["C"]),
]


@pytest.fixture
def view(qtbot):
    v = BatchTimelineView()
    qtbot.addWidget(v)
    v.resize(1280, 560)
    v.show()
    return v


def _decoding_requests(n_segments: int):
    """`n_segments` requests, each one prefill + one decode segment: 2n segments."""
    n = n_segments // 2
    requests = [RequestInfo(f"q{i}", 2.0 * i, 4, 2) for i in range(n)]
    iterations = []
    for i in range(n):
        iterations.append(_it(2 * i, prefills=[(f"q{i}", 0, 4)]))
        iterations.append(_it(2 * i + 1, decodes=[f"q{i}"], finished=[f"q{i}"]))
    return requests, iterations


def _counts(v: BatchTimelineView):
    return (len(v.gantt.getViewBox().addedItems), len(v.gantt.items),
            len(v.graphics.scene().items()))


def test_item_count_does_not_grow_with_segments(view):
    view.draw(*_decoding_requests(10))
    assert len(view.segments) == 10
    small = _counts(view)
    view.draw(*_decoding_requests(5000))
    assert len(view.segments) == 5000
    assert _counts(view) == small


def test_bars_hold_the_segments_arrays(view):
    view.draw(REQUESTS, ITERATIONS)
    seg = timeline_segments(REQUESTS, ITERATIONS)
    np.testing.assert_array_equal(view.segments.start_s, seg.start_s)
    for state, bar in view.bars.items():
        mask = seg.state == state
        np.testing.assert_array_equal(bar.opts["x0"], seg.start_s[mask])
        np.testing.assert_array_equal(bar.opts["x1"], seg.end_s[mask])
        np.testing.assert_allclose(bar.opts["y0"], seg.row[mask] - BAR_HEIGHT / 2)
    assert len(view.bars[PREEMPTED].opts["x0"]) == 1
    assert view.preempt_plot.getAxis("bottom").labelText == "time (s, simulated)"
    x, y = view.batch_curve.getData()
    assert y.tolist()[:4] == [1, 1, 2, 2]


def test_wall_clock_label(view):
    view.draw(REQUESTS[:1], [_it(0, prefills=[("A", 0, 8)], clock="wall")])
    assert view.preempt_plot.getAxis("bottom").labelText == "time (s, wall clock)"


def test_cursor_follows_current_index(view):
    view.draw(REQUESTS, ITERATIONS, current_index=2)
    assert view.cursor_x == pytest.approx(2.9)
    view.draw(REQUESTS, ITERATIONS, current_index=5)
    assert view.cursor_x == pytest.approx(5.9)
    assert all(line.value() == pytest.approx(5.9) for line in view.cursors)
    view.draw(REQUESTS, ITERATIONS)  # None: the last iteration
    assert view.cursor_x == pytest.approx(7.9)
    view.draw(REQUESTS, [])
    assert view.cursor_x is None


def test_hover_lookup_finds_the_request(view):
    view.draw(REQUESTS, ITERATIONS)
    i = view.segment_at_point(5.5, 2.1)  # C's row, between its prefills
    assert i is not None and int(view.segments.state[i]) == PREEMPTED
    text = view.describe_segment(i)
    assert text.startswith("C · preempted (will recompute its KV) · 5.000–6.000 s")
    assert "prompt 4 tokens" in text and "max new 3 tokens" in text
    i = view.segment_at_point(3.5, 0.9)  # B's second chunk
    assert view.describe_segment(i).startswith(f"B · {STATE_NAMES[PREFILL]}")
    assert int(view.segments.state[view.segment_at_point(2.0, 0.0)]) == DECODE
    assert view.segment_at_point(3.5, 0.5) is None  # between two rows' bars
    assert view.segment_at_point(-1.0, 0.0) is None


def test_hover_through_the_mouse_emits_the_text(view, qtbot):
    view.draw(REQUESTS, ITERATIONS)
    view.fit()
    vb = view.gantt.getViewBox()
    scene_pos = vb.mapViewToScene(pg.Point(5.5, 2.0))
    with qtbot.waitSignal(view.hovered, timeout=30_000) as blocker:  # a hang guard only
        view._on_mouse(scene_pos)
    assert blocker.args[0].startswith("C · preempted")
    assert view.info.text().startswith("C · preempted")


def test_redraw_reuses_items_and_empty_input(view):
    view.draw([], [])
    before = _counts(view)
    requests, iterations = synthetic_schedule(20, seed=3)
    view.draw(requests, iterations, current_index=10)
    assert _counts(view) == before
    assert sum(len(b.opts["x0"]) for b in view.bars.values()) == len(view.segments)


def test_exports_png(view, tmp_path):
    requests, iterations = synthetic_schedule(60, seed=0)
    view.draw(requests, iterations, current_index=len(iterations) // 2)
    out = tmp_path / "timeline.png"
    exporters.ImageExporter(view.graphics.scene()).export(str(out))
    assert out.stat().st_size > 10_000
    out2 = tmp_path / "gantt.png"
    exporters.ImageExporter(view.gantt).export(str(out2))
    assert out2.exists()


def test_peak_bins_cut_consecutive_iterations_at_their_maximum():
    def visible_peaks(start_s, end_s, values, **kwargs):
        bins = PeakBins(start_s, end_s, **kwargs)
        return bins.start_s, bins.end_s, bins.peaks(values)

    start = np.arange(10.0)
    end = start + 1.0  # back to back: no idle time
    values = np.array([1, 5, 2, 2, 9, 0, 3, 3, 3, 7])
    a, b, v = visible_peaks(start, end, values, max_steps=4)  # bins of 3: 0-2, 3-5, 6-8, 9
    assert a.tolist() == [0, 3, 6, 9] and b.tolist() == [3, 6, 9, 10]
    assert v.tolist() == [5, 9, 3, 7]
    # idle time after iteration 4 (nothing ran for 10 s): no bin spans it
    late = np.where(np.arange(10) > 4, 10.0, 0.0)
    a, b, v = visible_peaks(start + late, end + late, values, max_steps=4)
    assert a.tolist() == [0, 3, 15, 16, 19] and b.tolist() == [3, 5, 16, 19, 20]
    assert v.tolist() == [5, 9, 0, 3, 7]
    end = start + 0.5
    a, b, v = visible_peaks(start, end, values, x_range=(3.2, 5.2))  # 3..5 and a neighbour
    assert a.tolist() == [2, 3, 4, 5, 6] and v.tolist() == [2, 2, 9, 0, 3]
    a, _, v = visible_peaks(start, end, values)
    assert a.tolist() == start.tolist() and v.tolist() == values.tolist()


def test_a_growing_run_is_drawn_as_if_drawn_at_once(view):
    """Live: the records grow between redraws; the view extends its segments and strips.
    They equal a fresh view's of the same records, and a replaced history rebuilds."""
    requests, iterations = synthetic_schedule(80, max_iterations=400, kv_blocks=70)
    live: list = []
    for k in range(0, len(iterations), 37):
        live.extend(iterations[k: k + 37])
        view.draw(requests, live)
    fresh = BatchTimelineView()
    fresh.draw(requests, list(iterations))
    assert view.segments.rows() == fresh.segments.rows()
    for field in ("start_s", "end_s", "batch_size", "decode_tokens", "kv_usage", "preemptions"):
        assert np.array_equal(getattr(view.strips, field), getattr(fresh.strips, field))
    thinned = live[::2]  # a new list (thin_history): built again from scratch
    view.draw(requests, thinned)
    assert view.segments.rows() == timeline_segments(requests, thinned).rows()
    assert len(view.strips.start_s) == len(thinned)
    fresh.deleteLater()


def test_prefix_hits_and_evictions_are_drawn_and_grow_live(view):
    """B hits 4 of its 12 prompt tokens (its prefill bar 1.0-1.9 s): an orange mark over the
    first third of that bar; the hit-rate curve ends at 4 / 20; the eviction strip peaks at
    the 2 blocks evicted at iteration 1. Drawn live, record by record, the same."""
    import dataclasses

    requests = [RequestInfo("A", 0.0, 8, 2), RequestInfo("B", 0.5, 12, 2)]
    records = [_it(0, prefills=[("A", 0, 8)]),
               dataclasses.replace(_it(1, prefills=[("B", 4, 8, 4)], decodes=["A"],
                                       finished=["A"]), evicted_blocks=2),
               _it(2, decodes=["B"], finished=["B"])]
    for live in (False, True):
        v = BatchTimelineView()
        v.resize(1280, 560)
        if live:
            for k in range(1, len(records) + 1):
                v.draw(requests, records[:k])
        else:
            v.draw(requests, records)
        bars = v.hit_bars.opts
        assert list(bars["x0"]) == pytest.approx([1.0])
        assert list(bars["x1"]) == pytest.approx([1.0 + 0.9 * 4 / 12])
        assert list(bars["y0"]) == pytest.approx([1 - BAR_HEIGHT / 2])
        assert v.hit_rate_curve.getData()[1][-1] == pytest.approx(100 * 4 / 20)
        assert max(v.evict_curve.getData()[1]) == 2
        assert v.strips.evicted_blocks.tolist() == [0, 2, 0]
        v.deleteLater()
    assert "(4 cached: a prefix hit" in view_text(requests, records)


def view_text(requests, records) -> str:
    v = BatchTimelineView()
    v.draw(requests, records)
    i = next(k for k in range(len(v.segments)) if v.segments.row[k] == 1
             and int(v.segments.state[k]) == PREFILL)
    text = v.describe_segment(i)
    v.deleteLater()
    return text


def _drawn_items(v: BatchTimelineView) -> dict[str, list[np.ndarray]]:
    """The data of every item the timeline draws: bars, prefix-hit marks, strip curves."""
    out = {}
    for state, bar in v.bars.items():
        out[f"bars {STATE_NAMES[state]}"] = [np.asarray(bar.opts[k], dtype=np.float64)
                                             for k in ("x0", "x1", "y0", "height")]
    out["hits"] = [np.asarray(v.hit_bars.opts[k], dtype=np.float64)
                   for k in ("x0", "x1", "y0", "height")]
    for name in ("batch", "prefill", "decode", "cached", "kv", "hit_rate", "evict", "preempt"):
        curve = getattr(v, f"{name}_curve")
        x, y = curve.getData()
        out[name] = [x, y, np.asarray(curve.opts["connect"])]
    return out


def test_a_live_update_draws_what_a_full_redraw_of_the_same_records_draws(view):
    """Records appended between redraws (a few at a time, and past MAX_STRIP_STEPS, where
    the strips are binned) leave every item holding the arrays a fresh view's one draw of
    the same records gives it."""
    from inferlab.views.batch_timeline import MAX_STRIP_STEPS

    requests, iterations = synthetic_schedule(
        300, max_iterations=MAX_STRIP_STEPS + 500, max_running=24, token_budget=256,
        kv_blocks=120, mean_gap_s=0.02, mean_new_tokens=150)
    assert len(iterations) > MAX_STRIP_STEPS
    live: list = []
    k, sizes = 0, (1, 7, 64, 3, 400)
    while k < len(iterations):
        n = sizes[k % len(sizes)]
        live.extend(iterations[k: k + n])
        k += n
        view.draw(requests, live)
        if k in (1, 8, 72) or k >= len(iterations):
            fresh = BatchTimelineView()
            fresh.resize(1280, 560)
            fresh.draw(requests, list(live))
            got, want = _drawn_items(view), _drawn_items(fresh)
            assert got.keys() == want.keys()
            for name in want:
                for a, b in zip(got[name], want[name], strict=True):
                    np.testing.assert_array_equal(a, b, err_msg=f"{name} after {k} records")
            fresh.deleteLater()
    assert len(view.strips.start_s) == len(iterations)


def _xy(point) -> tuple[float, float]:
    return point.x(), point.y()


@pytest.mark.parametrize("x_range", [None, (0.37, 5.9), (-3.0, 1e4), (2.0, 2.0 + 1e-9)])
def test_grid_lines_are_opaque_in_the_colour_they_showed_over_white_and_under_the_data(
        view, x_range):
    """Each grid line keeps pyqtgraph's place and tick level and gets the opaque colour its
    translucent pen gave over the white background (fast to draw), for the axes that show
    values and the grid-only strip axes (their levels memoised across axes); the grid axes
    paint before their view box."""
    from PySide6.QtGui import QPainter, QPicture

    from inferlab.views.plot_items import over_white

    assert over_white(pg.mkColor(138, 138, 138, 51)).getRgb() == (232, 232, 232, 255)
    view.draw(REQUESTS, ITERATIONS)
    if x_range is not None:
        view.gantt.getViewBox().setXRange(*x_range, padding=0.0)
    view.grab()
    checked = 0
    for plot in view.plots:
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            if axis.grid is False:  # its line and inward ticks over the data, as pyqtgraph's
                assert axis.zValue() > plot.getViewBox().zValue()
                continue
            picture = QPicture()
            painter = QPainter(picture)
            want = pg.AxisItem.generateDrawSpecs(axis, painter)
            got = axis.generateDrawSpecs(painter)
            painter.end()
            assert (got is None) == (want is None)
            if want is None:
                continue
            assert got[0][0].color() == want[0][0].color()
            assert [_xy(p) for p in got[0][1:]] == [_xy(p) for p in want[0][1:]]
            assert len(got[1]) == len(want[1]) > 0
            for (pen, a1, a2), (old, b1, b2) in zip(got[1], want[1], strict=True):
                assert (_xy(a1), _xy(a2)) == (_xy(b1), _xy(b2))
                c, alpha = old.color(), old.color().alphaF()
                assert alpha < 1.0
                blended = [round(alpha * v + (1 - alpha) * 255) for v in c.getRgb()[:3]]
                assert list(pen.color().getRgb()) == [*blended, 255]
            assert [(r, f, t) for r, f, t in got[2]] == [(r, f, t) for r, f, t in want[2]]
            assert axis.zValue() < plot.getViewBox().zValue()
            for size in (37.0, 900.5):  # memoised across axes: pyqtgraph's values
                lo, hi = axis.range
                assert axis.tickValues(lo, hi, size) == pg.AxisItem.tickValues(axis, lo, hi, size)
            checked += 1
    assert checked == 8  # the Gantt's x grid, two strips' x and y grids, three strips' x grid


def test_grid_axes_draw_the_pixels_pyqtgraphs_axis_drawing_draws(view, monkeypatch):
    """GridAxis draws each tick level's lines with one drawLines, a grid-only axis without a
    QPicture: the view's image is the one pyqtgraph's own paint, specs and line-by-line
    drawPicture give with the same opaque colours."""
    from inferlab.views.plot_items import GridAxis

    requests, iterations = synthetic_schedule(60, seed=0)
    view.draw(requests, iterations, current_index=40)

    def image():
        for plot in view.plots:
            for name in ("left", "bottom"):
                plot.getAxis(name).picture = None
        return view.grab().toImage()

    ours = image()
    monkeypatch.setattr(GridAxis, "paint", pg.AxisItem.paint)
    monkeypatch.setattr(GridAxis, "drawPicture", pg.AxisItem.drawPicture)
    monkeypatch.setattr(GridAxis, "_grid_only", lambda self: False)
    assert image() == ours
