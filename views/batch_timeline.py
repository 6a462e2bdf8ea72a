"""The batching lab's timeline: a Gantt chart of every request's states, with per-iteration strips.

Rows are requests in arrival order (first arrival at the top), x is the run's clock. Each state
is ONE bar item holding all of its segments (STYLE.md: many cells, one item), so 10 or
100,000 segments cost the same number of items; a redraw is `setOpts` on those items. Bars, grid
axes and step curves are views/plot_items.py's, which paint pyqtgraph's pixels faster; a live
redraw reads only the new records (TimelineBuilder, GrowingColumns). Under the
chart, strips sharing its x axis: batch size, prefill and decode tokens, KV pool use and
preemptions, each value held over its iteration's span. A dashed line marks the current
iteration's end. Hovering finds the segment under the mouse by binary search on the arrays.

It draws records (`draw(requests, iterations, current_index)`); it starts no work.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QSizePolicy, QToolTip, QVBoxLayout, QWidget

from inferlab.engines.labs.batching.timeline import (
    DECODE,
    PREEMPTED,
    PREFILL,
    STALLED,
    STATE_NAMES,
    WAITING,
    GrowingColumns,
    IterationStrips,
    RunningHitRate,
    TimelineBuilder,
    TimelineSegments,
    cached_tokens_by_request,
    iteration_strips,
    prefix_hit_spans,
    segment_at,
    synthetic_schedule,
    timeline_segments,
)
from inferlab.engines.serve.records import IterationRecord, RequestInfo
from inferlab.views.plot_items import GridAxis, SolidBars, without_flat_interior
from inferlab.views.style import style_plot

STATE_COLORS = {
    WAITING: "#C9C9C9",    # queued: low-key grey
    PREFILL: "#009E73",    # green
    DECODE: "#0072B2",     # blue
    STALLED: "#9ED3F0",    # a pale decode blue: running, left out of the batch
    PREEMPTED: "#D55E00",  # vermillion
}
STATE_ORDER = (WAITING, PREFILL, DECODE, STALLED, PREEMPTED)
STATE_LEGEND = {WAITING: "waiting (queued)", PREFILL: "prefill", DECODE: "decode",
                STALLED: "stalled (not batched)", PREEMPTED: "preempted"}
BAR_HEIGHT = 0.8
"""Of a row's height: the gap between bars keeps neighbouring rows apart."""
BATCH_COLOR, KV_COLOR, CURSOR_COLOR = "#333333", "#7A4FA0", "#222222"
CACHED_COLOR = "#E69F00"  # prefix-hit tokens: orange, apart from prefill and decode
EVICT_COLOR = "#8C6D31"  # evicted prefix blocks: a dark ochre, the cache's loss
LABEL_WIDTH_PX = 128
AXIS_WIDTH_PX = 52


class SwatchSample(pg.ItemSample):
    """A legend sample: the bar's colour as a bordered square (no line across it)."""

    def paint(self, p, *args):
        p.setPen(pg.mkPen("#8A8A8A", width=1))
        p.setBrush(pg.mkBrush(self.item.opts["brush"]))
        p.drawRect(3, 5, 12, 12)


class RequestAxis(GridAxis):
    """Row numbers written as request ids, integer ticks only."""

    def __init__(self, **kwargs):
        super().__init__("left", **kwargs)
        self.ids: tuple[str, ...] = ()
        self.enableAutoSIPrefix(False)

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph API
        levels = super().tickSpacing(minVal, maxVal, size)
        out = []
        for spacing, offset in levels:
            spacing = max(1.0, float(round(spacing))) if spacing >= 0.5 else 1.0
            if all(spacing != s for s, _o in out):
                out.append((spacing, offset))
        return out

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        out = []
        for v in values:
            r = int(round(v))
            out.append(self.ids[r] if abs(v - r) < 1e-6 and 0 <= r < len(self.ids) else "")
        return out


def step_x(start_s: np.ndarray, end_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x and the connect array of values held over each iteration's [start, end], broken
    across idle time (a gap longer than half the median iteration): the same for every
    strip of one run, so computed once."""
    n = start_s.shape[0]
    x = np.empty(2 * n)
    x[0::2], x[1::2] = start_s, end_s
    connect = np.ones(2 * n, dtype=bool)
    if n:
        tol = 0.5 * float(np.median(end_s - start_s))
        connect[1:-1:2] = (start_s[1:] - end_s[:-1]) <= tol
        connect[-1] = False
    return x, connect


MAX_STRIP_STEPS = 2000
"""Strips draw at most this many steps: a longer (visible part of a) run is cut into bins of
consecutive iterations, each drawn at its peak, so a spike never disappears."""


class PeakBins:
    """The iterations overlapping `x_range` (all: None), at most `max_steps` of them (plus
    one per idle gap): bins of g consecutive iterations, cut at idle gaps, each spanning
    [first start, last end]. One binning serves every strip of a run (`peaks(values)`)."""

    def __init__(self, start_s: np.ndarray, end_s: np.ndarray,
                 x_range: tuple[float, float] | None = None,
                 max_steps: int = MAX_STRIP_STEPS) -> None:
        lo, hi = 0, start_s.shape[0]
        if x_range is not None and hi:
            lo = int(np.searchsorted(end_s, x_range[0], side="left"))
            hi = int(np.searchsorted(start_s, x_range[1], side="right"))
            lo, hi = max(lo - 1, 0), min(hi + 1, start_s.shape[0])
        self.lo, self.hi = lo, hi
        a, b = start_s[lo:hi], end_s[lo:hi]
        n = a.shape[0]
        self.cut = None  # the first iteration of each bin (None: every iteration its own)
        if n > max_steps:
            g = -(-n // max_steps)
            # a bin never spans idle time (a gap as step_x breaks on): its peak would be
            # drawn across the gap, as if that iteration had lasted through it
            tol = 0.5 * float(np.median(b - a))
            idle = np.nonzero(a[1:] - b[:-1] > tol)[0] + 1
            self.cut = np.union1d(np.arange(0, n, g), idle)
            a, b = a[self.cut], b[np.append(self.cut[1:], n) - 1]
        self.start_s, self.end_s = a, b

    def peaks(self, values: np.ndarray) -> np.ndarray:
        """Each bin's maximum of `values` (one per iteration)."""
        v = values[self.lo: self.hi]  # the maximum in its own dtype (counts: exact)
        peaks = v if self.cut is None else np.maximum.reduceat(v, self.cut)
        return np.asarray(peaks, dtype=np.float64)


def _count_axis(plot: pg.PlotItem, counts: np.ndarray, drawn_top: float | None = None) -> float:
    """A strip of counts: 0 to the largest (at least 1), a few integer ticks. Returns that
    top; nothing is redone when it is `drawn_top` (the axis would be laid out again)."""
    top = max(float(counts.max()) if counts.size else 0.0, 1.0)
    if top == drawn_top:
        return top
    plot.setYRange(0, top, padding=0.1)
    step = max(1, int(np.ceil(top / 3)))
    plot.getAxis("left").setTicks([[(float(v), str(v)) for v in range(0, int(top) + 1, step)]])
    return top


class GanttFrame(QWidget):
    """Requests as rows of bars over time, the legend and a read-out above them, strips on the
    same time axis below (`_strip`): the frame the batching and endpoint timelines draw in."""

    def __init__(self, hint: str, legend_columns: int, gantt_label: str, parent=None):
        super().__init__(parent)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        self.info = QLabel(hint)
        self.info.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.info.setStyleSheet("color: #444;")
        # the cursor's read-out under the chart, not in it: the chart keeps the height, and a
        # long line is cut at the window's edge instead of widening the window
        self.readout = QLabel("")
        self.readout.setStyleSheet("color: #222;")
        for label in (self.info, self.readout):
            label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 1)
        layout.addWidget(self.readout)
        layout.addWidget(self.info)
        gl = self.graphics.ci
        gl.setSpacing(2)
        gl.setContentsMargins(4, 4, 8, 4)

        # row 0: the legend (state colours), above the data: one 20 px row
        self.legend = pg.LegendItem(colCount=legend_columns, horSpacing=10, verSpacing=0,
                                    labelTextSize="9pt", labelTextColor="#222",
                                    sampleType=SwatchSample)
        self.legend.layout.setContentsMargins(0, 0, 0, 0)
        gl.addItem(self.legend, row=0, col=1)

        # row 1: the Gantt chart
        self.request_axis = RequestAxis()
        self.gantt = pg.PlotItem(axisItems={"left": self.request_axis,
                                            "bottom": GridAxis("bottom")})
        gl.addItem(self._row_label(gantt_label), row=1, col=0)
        gl.addItem(self.gantt, row=1, col=1)
        self._style(self.gantt, last=False)
        gl.layout.setRowStretchFactor(1, 10)

    # ---- construction helpers ----------------------------------------------------------------
    def _row_label(self, html: str) -> pg.LabelItem:
        label = pg.LabelItem(html, size="9pt", color="#222", justify="right")
        label.setFixedWidth(LABEL_WIDTH_PX)
        return label

    def _style(self, plot: pg.PlotItem, last: bool) -> None:
        style_plot(plot)
        plot.setMenuEnabled(False)
        plot.hideButtons()
        plot.getAxis("left").setWidth(AXIS_WIDTH_PX)
        for name in ("left", "bottom"):
            plot.getAxis(name).setTextPen("#333333")
            plot.getAxis(name).setPen("#8A8A8A")
        plot.showGrid(x=True, y=not isinstance(plot.getAxis("left"), RequestAxis), alpha=0.2)
        for name in ("top", "right"):  # hidden: else each x move sets their label's HTML
            plot.getAxis(name).enableAutoSIPrefix(False)
        if not last:
            plot.getAxis("bottom").setStyle(showValues=False)
            plot.getAxis("bottom").setHeight(4)
        plot.setContentsMargins(0, 0, 0, 0)

    def _strip(self, row: int, html: str, last: bool = False) -> pg.PlotItem:
        plot = pg.PlotItem(axisItems={"left": GridAxis("left"), "bottom": GridAxis("bottom")})
        self.graphics.ci.addItem(self._row_label(html), row=row, col=0)
        self.graphics.ci.addItem(plot, row=row, col=1)
        self._style(plot, last)
        plot.setXLink(self.gantt)
        vb = plot.getViewBox()
        vb.setMouseEnabled(x=True, y=False)
        vb.enableAutoRange(axis="x", enable=False)
        vb.setAutoVisible(y=True)
        plot.getAxis("left").setTickSpacing()  # automatic, few ticks in a short strip
        return plot

    @staticmethod
    def _curve(plot: pg.PlotItem, color: str, width: float = 1.0) -> pg.PlotCurveItem:
        curve = pg.PlotCurveItem(pen=pg.mkPen(color, width=width), antialias=False)
        plot.addItem(curve)
        return curve

    def _add_bars(self, legend: dict[int, str]) -> None:
        """One bar item per state (its colour, in the legend as `legend[state]`)."""
        self.bars: dict[int, pg.BarGraphItem] = {}
        for state, text in legend.items():
            bar = SolidBars(STATE_COLORS[state])
            self.gantt.addItem(bar)
            self.bars[state] = bar
            self.legend.addItem(bar, text)

    def _draw_bars(self, seg: TimelineSegments) -> None:
        """The request axis's names and every state's bars from `seg`."""
        if seg.request_ids != self.request_axis.ids:  # a live run: the same rows
            self.request_axis.ids = seg.request_ids
            self.request_axis.picture = None
            self.request_axis.update()
        for state, bar in self.bars.items():
            mask = seg.state == state
            rows = seg.row[mask].astype(np.float64)
            bar.setOpts(x0=seg.start_s[mask], x1=seg.end_s[mask], y0=rows - BAR_HEIGHT / 2,
                        height=np.full(rows.shape, BAR_HEIGHT))


STRIP_FIELDS = tuple(IterationStrips.__dataclass_fields__)


def _strip_columns() -> GrowingColumns:
    """Empty columns for a run's strips (their dtypes) and its running hit rate."""
    empty = iteration_strips([])
    return GrowingColumns({**{f: getattr(empty, f).dtype for f in STRIP_FIELDS},
                           "hit_rate": np.dtype(np.float64)})


class BatchTimelineView(GanttFrame):
    """The Gantt chart and its strips. `hovered(text)` as the mouse moves over segments."""

    hovered = Signal(str)

    def __init__(self, parent=None):
        super().__init__("Hover over a bar for the request, its state and its span.",
                         len(STATE_ORDER) + 1, "requests<br>(arrival order,<br>first at the top)",
                         parent)
        vb = self.gantt.getViewBox()
        vb.invertY(True)
        vb.disableAutoRange()
        self._follow = True  # fit new data until the user zooms or pans; double-click refits
        vb.sigRangeChangedManually.connect(self._user_range)
        self._add_bars({state: STATE_LEGEND[state] for state in STATE_ORDER})
        # over a prefill bar's upper part: the share of the prompt a prefix hit supplied
        self.hit_bars = SolidBars(CACHED_COLOR)
        self.gantt.addItem(self.hit_bars)
        self.legend.addItem(self.hit_bars, "prefix hit")

        # rows 2-5: strips
        self.batch_plot = self._strip(2, "batch size<br>(sequences)")
        self.tokens_plot = self._strip(  # two lines a strip: a label's lines set its height
            3, f'tokens: <span style="color:{STATE_COLORS[PREFILL]}">prefill</span>,<br>'
               f'<span style="color:{STATE_COLORS[DECODE]}">decode</span>, '
               f'<span style="color:{CACHED_COLOR}">prefix hit</span>')
        self.kv_plot = self._strip(
            4, f'<span style="color:{KV_COLOR}">KV pool used</span>,<br>'
               f'<span style="color:{CACHED_COLOR}">prefix hit rate</span> (%)')
        self.evict_plot = self._strip(5, "evicted blocks<br>per iteration")
        self.preempt_plot = self._strip(
            6, f'<span style="color:{STATE_COLORS[PREEMPTED]}">preemptions</span><br>'
               'per iteration',
            last=True)
        self.kv_plot.setYRange(0, 100, padding=0.08)
        self.kv_plot.getAxis("left").setTicks([[(v, str(v)) for v in (0, 50, 100)],
                                               [(v, "") for v in (25, 75)]])
        for plot in (self.kv_plot, self.evict_plot, self.preempt_plot):
            # short strips: labels at the edges may overhang (an axis with a grid clips them)
            plot.showGrid(x=True, y=False, alpha=0.2)
            plot.getAxis("left").setStyle(hideOverlappingLabels=False,
                                          textFillLimits=[(0, 0.95), (3, 0.9)])
        self.kv_plot.getViewBox().enableAutoRange(axis="y", enable=False)
        self.batch_curve = self._curve(self.batch_plot, BATCH_COLOR)
        self.prefill_curve = self._curve(self.tokens_plot, STATE_COLORS[PREFILL])
        self.decode_curve = self._curve(self.tokens_plot, STATE_COLORS[DECODE], width=1.5)
        self.cached_curve = self._curve(self.tokens_plot, CACHED_COLOR, width=1.5)
        self.cached_curve.setZValue(-1)  # under the decode line, which sits near 0 too
        self.kv_curve = self._curve(self.kv_plot, KV_COLOR)
        self.hit_rate_curve = self._curve(self.kv_plot, CACHED_COLOR, width=1.5)
        self.evict_curve = self._curve(self.evict_plot, EVICT_COLOR)
        # vertical lines: crisp without antialiasing, which drew their 2 px wide paths
        # ~15x slower (drawLines instead)
        self.preempt_curve = pg.PlotCurveItem(pen=pg.mkPen(STATE_COLORS[PREEMPTED], width=2),
                                              connect="pairs", antialias=False)
        self.preempt_plot.addItem(self.preempt_curve)
        self.plots = (self.gantt, self.batch_plot, self.tokens_plot, self.kv_plot,
                      self.evict_plot, self.preempt_plot)
        self.cursors = []
        for plot in self.plots:
            line = pg.InfiniteLine(angle=90, movable=False,
                                   pen=pg.mkPen(CURSOR_COLOR, width=1, style=Qt.DashLine))
            line.setVisible(False)
            plot.addItem(line, ignoreBounds=True)
            self.cursors.append(line)
        # fixed heights: what the strips do not take, the Gantt chart gets
        for plot, height in ((self.batch_plot, 40), (self.tokens_plot, 48), (self.kv_plot, 48),
                             (self.evict_plot, 36), (self.preempt_plot, 60)):  # the last: time axis
            plot.setFixedHeight(height)

        self.requests: Sequence[RequestInfo] = ()
        self.iterations: Sequence[IterationRecord] = ()
        self.segments: TimelineSegments | None = None
        self.strips: IterationStrips | None = None
        self._info_by_row: list[RequestInfo] = []
        self._prompt_tokens: dict[str, int] = {}  # request id -> prompt tokens
        self._key = None
        self._builder = None  # the TimelineBuilder of the drawn records (see _segments)
        self._built, self._built_requests, self._built_last = 0, None, None
        self._columns = _strip_columns()  # the strips and hit rate of the drawn iterations
        self._cached: dict[str, int] = {}  # request id -> prompt tokens a prefix hit supplied
        self._hit_rate = RunningHitRate(())
        self.hit_rate = np.zeros(0)  # after each drawn iteration (RunningHitRate)
        self._count_tops = (None, None)  # the preemption and eviction strips' drawn tops
        self._limit_rows: int | None = None  # the rows the Gantt's y limits were set for
        self.current_index: int | None = None
        self._hover_text = ""
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse)
        self.graphics.scene().sigMouseClicked.connect(self._on_click)

    # ---- drawing -------------------------------------------------------------------------------
    def draw(self, requests: Sequence[RequestInfo], iterations: Sequence[IterationRecord],
             current_index: int | None = None) -> None:
        """Redraw from records; `current_index` (into `iterations`; None: the last) places the
        cursor. The segments are recomputed only when the records change (new sequences or new
        lengths), so moving the cursor is cheap."""
        key = (id(requests), len(requests), id(iterations), len(iterations))
        if key != self._key:
            self._key = key
            self.requests, self.iterations = requests, iterations
            self.segments, self.strips = self._segments(requests, iterations)
            self._draw_segments(self.segments)
            self._draw_hits(self.segments)
            self._draw_strips(self.strips)
            clock = iterations[0].clock if iterations else "wall"
            label = "simulated" if clock == "simulated" else "wall clock"
            if self.preempt_plot.getAxis("bottom").labelText != f"time (s, {label})":
                self.preempt_plot.setLabel("bottom", f"time (s, {label})", color="#333333")
            if self._follow:
                self.fit()
        self.set_current(current_index)

    def _segments(self, requests, iterations) -> tuple[TimelineSegments, IterationStrips]:
        """Segments and strips, extending the last ones when only records were appended (a
        live run): the cost of a redraw is then the new records, not the whole run."""
        b, n = self._builder, self._built
        grown = (b is not None and requests is self._built_requests and len(iterations) >= n
                 and (n == 0 or iterations[n - 1] is self._built_last))
        if not grown:
            b = self._builder = TimelineBuilder(requests)
            self._built_requests, n = requests, 0
            by_id = {r.request_id: r for r in requests}  # the same requests: the same rows
            self._info_by_row = [by_id[rid] for rid in b.request_ids]
            self._prompt_tokens = {r.request_id: r.prompt_tokens for r in requests}
            self._columns = _strip_columns()
            self._cached = {}
            self._hit_rate = RunningHitRate(requests)
        new = iterations[n:]
        b.extend(new)
        if new:  # appended to the columns: a redraw reads the new records only
            strips = iteration_strips(new)
            self._columns.append({**{f: getattr(strips, f) for f in STRIP_FIELDS},
                                  "hit_rate": self._hit_rate.extend(new)})
        for rid, cached in cached_tokens_by_request(new).items():
            self._cached.setdefault(rid, cached)
        self._built = len(iterations)
        self._built_last = iterations[-1] if iterations else None
        self.hit_rate = self._columns["hit_rate"]
        strips = IterationStrips(**{f: self._columns[f] for f in STRIP_FIELDS})
        return b.segments(), strips

    def fit(self) -> None:
        """Show the whole run: every row, arrival of the first to the end of the last."""
        seg = self.segments
        n = len(seg.request_ids) if seg is not None else 0
        vb = self.gantt.getViewBox()
        if seg is not None and len(seg):
            lo, hi = float(seg.start_s.min()), float(seg.end_s.max())
            vb.setXRange(lo, hi if hi > lo else lo + 1.0, padding=0.01)
        if vb.viewRange()[1] != [-0.5, max(n, 1) - 0.5]:
            vb.setYRange(-0.5, max(n, 1) - 0.5, padding=0.0)
        if not self._follow:
            self._follow = True
            self._draw_strip_curves()

    def _user_range(self, *_args) -> None:
        self._follow = False
        self._draw_strip_curves()  # the peaks of what is now in view

    def _draw_segments(self, seg: TimelineSegments) -> None:
        self._draw_bars(seg)
        n = len(seg.request_ids)
        vb = self.gantt.getViewBox()
        if n != self._limit_rows:
            self._limit_rows = n
            vb.setLimits(yMin=-1.5, yMax=max(n, 1) + 0.5)

    def _draw_hits(self, seg: TimelineSegments) -> None:
        rows, x0, x1 = prefix_hit_spans(seg, self._cached, self._prompt_tokens)
        self.hit_bars.setOpts(x0=x0, x1=x1, y0=rows - BAR_HEIGHT / 2,
                              height=np.full(rows.shape, 0.4 * BAR_HEIGHT))

    def _draw_strips(self, s: IterationStrips) -> None:
        self._draw_strip_curves()
        self._draw_preemptions(s)

    def _draw_strip_curves(self, *_args) -> None:
        """The step curves of what is in view (peaks of bins when that is long); redrawn
        when the view's x range changes."""
        s = self.strips
        if s is None:
            return
        x_range = None if self._follow else tuple(self.gantt.getViewBox().viewRange()[0])
        bins = PeakBins(s.start_s, s.end_s, x_range)  # one binning and one x for the seven
        x, connect = step_x(bins.start_s, bins.end_s)
        for curve, values, scale in ((self.batch_curve, s.batch_size, 1.0),
                                     (self.prefill_curve, s.prefill_tokens, 1.0),
                                     (self.decode_curve, s.decode_tokens, 1.0),
                                     (self.cached_curve, s.cached_tokens, 1.0),
                                     (self.kv_curve, s.kv_usage, 100.0),
                                     (self.hit_rate_curve, self.hit_rate, 100.0),
                                     (self.evict_curve, s.evicted_blocks, 1.0)):
            y = np.repeat(bins.peaks(values), 2)
            if scale != 1.0:
                y *= scale
            cx, cy, c_connect = without_flat_interior(x, y, connect)
            curve.setData(cx, cy, connect=c_connect, skipFiniteCheck=True)

    def _draw_preemptions(self, s: IterationStrips) -> None:
        hit = s.preemptions > 0
        x = np.repeat(0.5 * (s.start_s[hit] + s.end_s[hit]), 2)
        y = np.zeros(x.shape)
        y[1::2] = s.preemptions[hit]
        self.preempt_curve.setData(x, y, connect="pairs", skipFiniteCheck=True)
        self._count_tops = tuple(
            _count_axis(plot, counts, top) for plot, counts, top in zip(
                (self.preempt_plot, self.evict_plot), (s.preemptions, s.evicted_blocks),
                self._count_tops, strict=True))

    def set_current(self, index: int | None) -> None:
        """Move the cursor to iteration `index`'s end (None: the last iteration)."""
        n = len(self.iterations)
        if n == 0:
            self.current_index = None
            for line in self.cursors:
                line.setVisible(False)
            self.readout.setText("no iterations yet")
            return
        index = n - 1 if index is None else min(max(int(index), 0), n - 1)
        self.current_index = index
        it = self.iterations[index]
        for line in self.cursors:
            line.setPos(it.end_s)
            line.setVisible(True)
        self.readout.setText(
            f"dashed line: iteration {it.index} ({index + 1} of {n}), ends at {it.end_s:.3f} s"
            f" · batch {it.batch_size} · {it.prefill_tokens} prefill + {it.decode_tokens} "
            f"decode tokens · KV pool {100 * it.kv_usage:.0f}% used · {it.waiting} waiting"
            " · drag to pan, wheel to zoom, double-click to fit")

    @property
    def cursor_x(self) -> float | None:
        return self.cursors[0].value() if self.cursors[0].isVisible() else None

    # ---- hover -----------------------------------------------------------------------------------
    def segment_at_point(self, x_s: float, y_row: float) -> int | None:
        """The segment under data point (time, row), or None: the row is the nearest integer
        and must fall inside the bar's height."""
        seg = self.segments
        if seg is None or not len(seg):
            return None
        row = int(round(y_row))
        if abs(y_row - row) > BAR_HEIGHT / 2:
            return None
        return segment_at(seg, row, x_s)

    def describe_segment(self, i: int) -> str:
        seg = self.segments
        row = int(seg.row[i])
        info = self._info_by_row[row]
        a, b = float(seg.start_s[i]), float(seg.end_s[i])
        cached = self._cached.get(info.request_id, 0)
        hit = f" ({cached} cached: a prefix hit, marked orange)" if cached else ""
        state = int(seg.state[i])
        name = STATE_NAMES[state] + (" (will recompute its KV)" if state == PREEMPTED else "")
        return (f"{info.request_id} · {name} · {a:.3f}–{b:.3f} s "
                f"({b - a:.3f} s) · prompt {info.prompt_tokens} tokens{hit} · max new "
                f"{info.max_new_tokens} tokens · arrived {info.arrival_s:.3f} s")

    def _on_click(self, event) -> None:
        if event.double() and self.gantt.getViewBox().sceneBoundingRect().contains(
                event.scenePos()):
            self.fit()

    def _on_mouse(self, scene_pos) -> None:
        vb = self.gantt.getViewBox()
        text = ""
        if vb.sceneBoundingRect().contains(scene_pos):
            point = vb.mapSceneToView(scene_pos)
            i = self.segment_at_point(point.x(), point.y())
            if i is not None:
                text = self.describe_segment(i)
        if text != self._hover_text:
            self._hover_text = text
            self.info.setText(text or "Hover over a bar for the request, its state and its span.")
            self.hovered.emit(text)
            if text:
                view_pos = self.graphics.mapFromScene(scene_pos)
                QToolTip.showText(self.graphics.mapToGlobal(view_pos), text, self.graphics)
            else:
                QToolTip.hideText()


def bench_timeline(n_requests: int = 2000, n_iterations: int = 20_000) -> dict:
    """Segments and one full draw + render (offscreen grab at 1280x560) of a synthetic
    continuous run, in ms. For a look at the cost; no test asserts it."""
    requests, iterations = synthetic_schedule(
        n_requests, max_iterations=n_iterations, max_running=64, token_budget=2048,
        kv_blocks=3000, mean_gap_s=0.01, mean_new_tokens=640)
    t = time.perf_counter()
    segments = timeline_segments(requests, iterations)
    segments_ms = 1e3 * (time.perf_counter() - t)
    pg.mkQApp()
    view = BatchTimelineView()
    view.resize(1280, 560)
    t = time.perf_counter()
    view.draw(requests, iterations)
    view.grab()
    render_ms = 1e3 * (time.perf_counter() - t)  # segments and strips again, then the paint
    t = time.perf_counter()
    view.draw(requests, iterations, current_index=len(iterations) // 2)
    view.grab()
    cursor_ms = 1e3 * (time.perf_counter() - t)  # the same records: cursor move and repaint
    # a live run: the records grow by a few iterations between two redraws (the lab redraws
    # at most every 33 ms); the median redraw + repaint of 20 such updates
    live = list(iterations[: len(iterations) - 100])
    view.draw(requests, live)
    updates = []
    for k in range(len(live), len(iterations), 5):
        live.extend(iterations[k: k + 5])
        t = time.perf_counter()
        view.draw(requests, live)
        view.grab()
        updates.append(1e3 * (time.perf_counter() - t))
    view.deleteLater()
    return {"segments_ms": segments_ms, "render_ms": render_ms, "cursor_ms": cursor_ms,
            "update_ms": float(np.median(updates)), "update_max_ms": max(updates),
            "segments": len(segments),
            "iterations": len(iterations), "requests": len(requests)}
