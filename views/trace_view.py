"""A published trace at a glance (issue 43): what its requests imply for batching and caching.

Five plots drawn from one `TraceStats` record (engines/serve/traces/stats.py):

- arrivals per second over the trace's time (one step curve);
- input and output length histograms, log2 bins (bar k spans 2^(k-1) … 2^k tokens; the x axis
  is log2 of the length, its ticks labelled 1, 2, 4 … 1k (1024) … in tokens);
- block reuse: how many block ids are listed by 1, 2-3, 4-7 … requests (log2 bins; the
  count on a log scale, 1, 10, 100 …);
- turns per session: how many sessions hold 1, 2, 3 … requests.

Each histogram is ONE bar item. An "Open trace…" button asks the lab for a file
(`open_requested(path)`); the view reads nothing itself, it draws what `show_stats` gets.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.serve.traces.stats import TraceStats
from inferlab.views.axes import si_label
from inferlab.views.plot_items import SolidBars
from inferlab.views.style import color, fixed_plot, pen

TRACE_FILTER = "Traces (*.jsonl *.json *.csv);;All files (*)"


class Log2Axis(pg.AxisItem):
    """An axis whose value x stands for 2^x: ticks at whole x, labelled 1, 2, 4 … 1k, 2k …;
    x = ZERO_AT labelled 0 (the bin of zero-length requests)."""

    def __init__(self, orientation: str = "bottom", **kwargs):
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)
        self.zero_shown = False

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph API
        lo, hi = math.ceil(minVal), math.floor(maxVal)
        step = max(1, math.ceil((hi - lo + 1) / max(size / 45, 1)))
        major = [float(k) for k in range(lo, hi + 1) if k >= 0 and k % step == 0]
        if self.zero_shown and minVal <= ZERO_AT <= maxVal:
            major = [ZERO_AT, *major]
        return [(1.0, major)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        return ["0" if v == ZERO_AT else power_of_two_label(round(v)) for v in values]


def power_of_two_label(k: int) -> str:
    """2^k as a context length is said: 512, 1k, 4k, 128k, 1M (k and M of 1024)."""
    if k < 10:
        return f"{2 ** k:g}" if k >= 0 else f"{2.0 ** k:g}"
    return f"{2 ** (k - 10)}k" if k < 20 else f"{2 ** (k - 20)}M"


class Log10CountAxis(pg.AxisItem):
    """A left axis whose value y stands for 10^y: ticks at whole y, labelled 1, 10, 100, 1k …
    (bars drawn from LOG_FLOOR, so a count of 1 still shows)."""

    def __init__(self, orientation: str = "left", **kwargs):
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph API
        return [(1.0, [float(k) for k in range(max(math.ceil(minVal), 0),
                                               math.floor(maxVal) + 1)])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        return [si_label(10.0 ** v) for v in values]


LOG_FLOOR = -0.3
"""Where log-count bars start (10^-0.3 ≈ 0.5): a bar of 1 is 0.3 tall."""
ZERO_AT = -1.25
"""Where the bin of zero-length requests is drawn, left of the log2 axis' 1."""


def log2_bars(hist) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x0, x1, height of a log2 histogram's bars in log2 units: bin k ≥ 1 spans k-1 … k (its
    lengths 2^(k-1) … 2^k), bin 0 (zero) a half-width bar centred on ZERO_AT."""
    counts = np.asarray(hist, dtype=np.float64)
    k = np.arange(counts.size, dtype=np.float64)
    x0, x1 = k - 1.0, k.copy()
    if counts.size:
        x0[0], x1[0] = ZERO_AT - 0.25, ZERO_AT + 0.25
    keep = counts > 0
    return x0[keep], x1[keep], counts[keep]


def _bars(plot: pg.PlotItem, colour: str) -> SolidBars:
    bars = SolidBars(colour)
    plot.addItem(bars)
    return bars


def _plot(title: str, left: str, bottom: str, log2_x: bool = False,
          log10_y: bool = False) -> pg.PlotWidget:
    axes = {"bottom": Log2Axis("bottom")} if log2_x else {}
    if log10_y:
        axes["left"] = Log10CountAxis("left")
    widget = pg.PlotWidget(background="w", axisItems=axes)
    fixed_plot(widget, title, left, bottom)
    # one width for every left axis: the plots line up, and an empty plot (a trace with no
    # block ids or sessions) keeps room for its axis label
    widget.getAxis("left").setWidth(52)
    widget.setMinimumSize(160, 90)  # three rows must fit the lab's 800-px window
    return widget


class TraceView(QWidget):
    """The trace tab: Open trace…, a summary line and the five plots of `show_stats`."""

    open_requested = Signal(str)  # a trace file's path
    replay_toggled = Signal(bool)  # run the lab's timeline on the open trace, or not

    def __init__(self, parent=None):
        super().__init__(parent)
        self.stats: TraceStats | None = None
        self.button = QPushButton("Open trace…")
        self.button.setToolTip("Read a published trace (Mooncake, Bailian, Azure, BurstGPT, "
                               "ShareGPT or InferLab JSONL; its format from its first line) and "
                               "show its arrivals, lengths, block reuse and sessions")
        self.button.clicked.connect(self._choose)
        self.replay = QCheckBox("Run the lab on it")
        self.replay.setToolTip("The lab's run (Timeline, metrics, Step / Run) on the open "
                               "trace's first requests (as many as the Requests setting), "
                               "arriving at the trace's times, instead of the seeded workload")
        self.replay.setEnabled(False)
        self.replay.toggled.connect(self.replay_toggled)
        self.status = QLabel("No trace open: Open trace… reads one (in the background).")
        self.status.setWordWrap(True)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setStyleSheet("color: #333")
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.button)
        top.addWidget(self.replay)
        top.addWidget(self.status, 1)

        self.arrivals_plot = _plot("Arrivals", "requests / s", "time from first arrival (s)")
        self.arrivals = pg.PlotCurveItem(pen=pen(0))
        self.arrivals_plot.getPlotItem().addItem(self.arrivals)
        self.input_plot = _plot("Input lengths", "requests", "prompt tokens (log2 bins)",
                                log2_x=True)
        self.output_plot = _plot("Output lengths", "requests", "output tokens (log2 bins)",
                                 log2_x=True)
        self.reuse_plot = _plot("Block reuse", "block ids (log)",
                                "requests listing the block (log2 bins)", log2_x=True,
                                log10_y=True)
        self.turns_plot = _plot("Turns per session", "sessions", "requests in a session")
        self.input_bars = _bars(self.input_plot.getPlotItem(), color(0))
        self.output_bars = _bars(self.output_plot.getPlotItem(), color(1))
        self.reuse_bars = _bars(self.reuse_plot.getPlotItem(), color(2))
        self.turns_bars = _bars(self.turns_plot.getPlotItem(), color(3))
        self.empty_notes = {}
        for name, plot in (("reuse", self.reuse_plot), ("turns", self.turns_plot)):
            note = pg.TextItem("", color="#777", anchor=(0.5, 0.5))
            plot.getPlotItem().addItem(note, ignoreBounds=True)
            self.empty_notes[name] = note

        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addWidget(self.arrivals_plot, 0, 0, 1, 2)
        grid.addWidget(self.input_plot, 1, 0)
        grid.addWidget(self.output_plot, 1, 1)
        grid.addWidget(self.reuse_plot, 2, 0)
        grid.addWidget(self.turns_plot, 2, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.summary)
        layout.addLayout(grid, 1)
        self.show_stats(None)

    def _choose(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open trace", "", TRACE_FILTER)
        if path:
            self.open_requested.emit(path)

    def set_busy(self, busy: bool, text: str = "") -> None:
        self.button.setEnabled(not busy)
        self.replay.setEnabled(not busy and self.stats is not None)
        if text:
            self.status.setText(text)

    # ---- drawing -----------------------------------------------------------------------------
    def show_stats(self, s: TraceStats | None, name: str = "") -> None:
        """Draw `s` (None: clear); `name` titles the summary (the file's name, its format)."""
        self.stats = s
        if s is None:
            self.summary.setText("")
            self.arrivals.setData(np.zeros(1), np.zeros(0), stepMode="center")
            for bars in (self.input_bars, self.output_bars, self.reuse_bars, self.turns_bars):
                bars.setOpts(x0=[], x1=[], y0=[], height=[])
            self._note("reuse", "no trace")
            self._note("turns", "no trace")
            return
        self.summary.setText(self._summary(s, name))
        rates = np.asarray(s.arrivals_per_s, dtype=np.float64)
        edges = np.arange(rates.size + 1, dtype=np.float64) * s.bin_s
        self.arrivals.setData(edges, rates, stepMode="center", skipFiniteCheck=True)
        top = float(rates.max()) if rates.size else 1.0
        self.arrivals_plot.getPlotItem().setYRange(-0.04 * top, top * 1.08 or 1.0, padding=0)
        self.arrivals_plot.getPlotItem().setXRange(0, float(edges[-1]) or 1.0, padding=0.01)
        self.arrivals_plot.getPlotItem().setLabel(
            "left", "requests / s" + (f" ({s.bin_s:g}-s bins)" if s.bin_s != 1 else ""))
        for plot, bars, hist in ((self.input_plot, self.input_bars, s.input_hist),
                                 (self.output_plot, self.output_bars, s.output_hist)):
            self._log2_hist(plot, bars, hist)
        x0, x1, h = log2_bars(s.reuse_hist)
        # y log10 (pyqtgraph's log mode does not transform bars): bar tops at log10(count)
        top = np.log10(h) if h.size else h
        self.reuse_bars.setOpts(x0=x0, x1=x1, y0=np.full_like(h, LOG_FLOOR),
                                height=top - LOG_FLOOR)
        self._fit(self.reuse_plot, x0, x1, top, LOG_FLOOR)
        self._note("reuse", "" if h.size else "this trace names no block ids")
        turns = np.asarray(s.turns_hist, dtype=np.float64)
        t = np.nonzero(turns)[0].astype(np.float64)
        self.turns_bars.setOpts(x0=t - 0.4, x1=t + 0.4, y0=np.zeros_like(t), height=turns[
            turns > 0])
        self._fit(self.turns_plot, t - 0.5, t + 0.5, turns[turns > 0])
        self._note("turns", "" if t.size else "this trace names no sessions")

    def _log2_hist(self, plot: pg.PlotWidget, bars: SolidBars, hist) -> None:
        x0, x1, h = log2_bars(hist)
        bars.setOpts(x0=x0, x1=x1, y0=np.zeros_like(h), height=h)
        plot.getPlotItem().getAxis("bottom").zero_shown = bool(len(hist) and hist[0])
        self._fit(plot, x0, x1, h)

    def _fit(self, plot: pg.PlotWidget, x0, x1, h, floor: float = 0.0) -> None:
        p = plot.getPlotItem()
        for name in ("left", "bottom"):
            p.getAxis(name).setStyle(showValues=bool(len(h)))
        if len(h):
            p.setXRange(float(np.min(x0)) - 0.4, float(np.max(x1)) + 0.6, padding=0)
            top = float(np.max(h))
            p.setYRange(floor, top + 0.08 * (top - floor) if top > floor else floor + 1,
                        padding=0)
        else:
            p.setXRange(0, 1, padding=0)
            p.setYRange(0, 1, padding=0)

    def _note(self, which: str, text: str) -> None:
        note = self.empty_notes[which]
        note.setText(text)
        note.setPos(0.5, 0.5)

    @staticmethod
    def _summary(s: TraceStats, name: str) -> str:
        what = f"<b>{name}</b>: " if name else ""
        parts = [f"{s.requests:,} requests over {s.duration_s:,.1f} s "
                 f"(mean {s.mean_rate_per_s:,.2f} req/s, peak "
                 f"{max(s.arrivals_per_s, default=0):,.0f} req/s)",
                 f"input {s.input_tokens:,} tokens (mean {s.input_tokens / max(s.requests, 1):,.0f})",
                 f"output {s.output_tokens:,} tokens (mean "
                 f"{s.output_tokens / max(s.requests, 1):,.0f})"]
        if s.blocks:
            parts.append(f"{s.blocks:,} distinct blocks of {s.block_size} tokens, "
                         f"{s.shared_block_refs:,} of {s.block_refs:,} block references "
                         "shared with another request")
        if s.sessions:
            parts.append(f"{s.sessions:,} sessions")
        if s.requests_empty:
            parts.append(f"with 0 input or output tokens: {s.requests_empty:,} "
                         "(a run leaves them out)")
        return what + " · ".join(parts)
