"""The cluster lab's timeline: one lane per instance (prefill instances first, then decode
instances, or the replicas), each iteration a bar on the run's clock, and a lane for the link
with every KV transfer as a span; under it, strips sharing the x axis: each instance's KV pool
use. Beside it, each instance's utilisation (busy / makespan) as a bar.

Back-to-back iterations of one kind (with prefill tokens, or decodes only) are drawn as one
bar: a busy instance runs thousands of iterations, each too short to see, and the merge keeps
one bar per stretch of one kind (STYLE.md: many cells, few items). It draws records; it starts
no work.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from inferlab.views.style import color, style_plot

PREFILL_COLOR = "#009E73"  # the batching lab's prefill green
DECODE_COLOR = "#0072B2"  # and its decode blue
TRANSFER_COLOR = "#E69F00"  # KV on the link: orange
BAR_HEIGHT = 0.7
LEGEND_MAX_INSTANCES = 8  # past this the KV strip's legend would hide the strip


def merged_spans(starts, ends, kinds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, kinds) with each run of consecutive back-to-back records of one kind
    merged into one span (a record starting where the previous one of its kind ended)."""
    starts, ends, kinds = (np.asarray(a) for a in (starts, ends, kinds))
    if not len(starts):
        return starts, ends, kinds
    new = np.ones(len(starts), dtype=bool)
    new[1:] = (kinds[1:] != kinds[:-1]) | (starts[1:] > ends[:-1] + 1e-12)
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(starts) - 1)
    return starts[first], ends[last], kinds[first]


def lane_label(index: int, role: str, tp: int = 1) -> str:
    """"prefill 0 (1 GPU)", "replica 2 (4 GPUs)": the instance's role, index and GPUs."""
    name = "replica" if role == "colocated" else role
    return f"{name} {index} ({tp} GPU{'s' if tp > 1 else ''})"


class ClusterTimeline(QWidget):
    """`draw(state)` with a ClusterState (engines/labs/cluster/section.py)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas)

        self.lanes = self.canvas.addPlot(row=0, col=0)
        style_plot(self.lanes)
        self.lanes.setTitle("Instances and the link (simulated clock)")
        self.lanes.setLabel("bottom", "time", units="s")
        self.lanes.invertY(True)
        self.lanes.setMouseEnabled(x=True, y=False)
        self.lanes.getAxis("left").setWidth(150)
        # the legend sits in a band kept empty above the first lane
        self.legend = self.lanes.addLegend(offset=(10, 2), labelTextSize="9pt",
                                           colCount=3)
        self.prefill_bars = pg.BarGraphItem(x0=[], x1=[], y=[], height=BAR_HEIGHT,
                                            brush=PREFILL_COLOR, pen=pg.mkPen(None),
                                            name="iteration with prefill")
        self.decode_bars = pg.BarGraphItem(x0=[], x1=[], y=[], height=BAR_HEIGHT,
                                           brush=DECODE_COLOR, pen=pg.mkPen(None),
                                           name="decodes only")
        transfer = pg.mkColor(TRANSFER_COLOR)
        transfer.setAlpha(150)  # overlapping transfers read darker
        self.transfer_bars = pg.BarGraphItem(x0=[], x1=[], y=[], height=BAR_HEIGHT,
                                             brush=transfer, pen=pg.mkPen(None),
                                             name="KV transfer")
        for item in (self.prefill_bars, self.decode_bars, self.transfer_bars):
            self.lanes.addItem(item)
        # a transfer lasts microseconds to milliseconds: a tick at each keeps it visible at
        # any zoom (the bar under it is its true length)
        self.transfer_ticks = pg.ScatterPlotItem(symbol="|", size=14, pen=pg.mkPen(
            TRANSFER_COLOR, width=1.5), brush=None)
        self.lanes.addItem(self.transfer_ticks)

        self.kv = self.canvas.addPlot(row=1, col=0)
        style_plot(self.kv)
        self.kv.setXLink(self.lanes)
        self.kv.setLabel("left", "KV pool used", units="%")
        self.kv.setLabel("bottom", "time", units="s")
        self.kv.setYRange(0, 100)
        self.kv.getAxis("left").setWidth(150)
        self.kv.setMaximumHeight(190)
        self.kv_legend = self.kv.addLegend(offset=(10, 2), labelTextSize="8pt", colCount=4)
        self.kv_curves: list = []

        self.util = self.canvas.addPlot(row=0, col=1, rowspan=2)
        style_plot(self.util)
        self.util.setTitle("Utilisation")
        self.util.setLabel("bottom", "busy / makespan", units="%")
        self.util.setXRange(0, 100)
        self.util.invertY(True)
        self.util.setMouseEnabled(x=False, y=False)
        self.util.setYLink(self.lanes)
        self.util.getAxis("left").setStyle(showValues=False)
        self.canvas.ci.layout.setColumnStretchFactor(0, 5)
        self.canvas.ci.layout.setColumnStretchFactor(1, 1)
        self.util_bars = pg.BarGraphItem(x0=[], x1=[], y=[], height=BAR_HEIGHT,
                                         brush="#7F7F7F", pen=pg.mkPen(None))
        self.util.addItem(self.util_bars)
        self.util_text: list = []
        self.n_bars = 0  # bars drawn by the last draw (merged spans), for tests

    def clear(self) -> None:
        for bars in (self.prefill_bars, self.decode_bars, self.transfer_bars, self.util_bars):
            bars.setOpts(x0=[], x1=[], y=[])
        self.transfer_ticks.setData([], [])
        for curve in self.kv_curves:
            self.kv.removeItem(curve)
        self.kv_curves = []
        self.kv_legend.clear()
        for text in self.util_text:
            self.util.removeItem(text)
        self.util_text = []
        self.n_bars = 0

    def draw(self, state) -> None:
        self.clear()
        if state is None:
            return
        instances = state.instances
        n = len(instances)
        rows = {"prefill": ([], [], []), "decode": ([], [], [])}
        for inst in instances:
            its = inst.iterations
            starts = np.fromiter((r.start_s for r in its), float, len(its))
            ends = np.fromiter((r.end_s for r in its), float, len(its))
            has_prefill = np.fromiter((r.prefill_tokens > 0 for r in its), bool, len(its))
            s, e, k = merged_spans(starts, ends, has_prefill)
            for kind, mask in (("prefill", k), ("decode", ~k)):
                x0, x1, y = rows[kind]
                x0.append(s[mask])
                x1.append(e[mask])
                y.append(np.full(int(mask.sum()), inst.index, dtype=float))
        total = 0
        for kind, bars in (("prefill", self.prefill_bars), ("decode", self.decode_bars)):
            x0, x1, y = (np.concatenate(a) if a else np.zeros(0) for a in rows[kind])
            bars.setOpts(x0=x0, x1=x1, y=y, height=BAR_HEIGHT)
            total += len(x0)
        t = state.transfers
        self.transfer_bars.setOpts(x0=[s.start_s for s in t], x1=[s.end_s for s in t],
                                   y=[float(n)] * len(t), height=BAR_HEIGHT)
        self.transfer_ticks.setData([0.5 * (s.start_s + s.end_s) for s in t], [float(n)] * len(t))
        self.n_bars = total + len(t)
        labels = [(inst.index, lane_label(inst.index, inst.role, inst.tp))
                  for inst in instances]
        if t:
            labels.append((n, "link (KV transfers)"))
        self.lanes.getAxis("left").setTicks([labels, []])
        self.lanes.setYRange(-1.4, (n if t else n - 1) + 0.6, padding=0)
        end_s = max(state.makespan_s + min((r.arrival_s for r in state.requests), default=0),
                    1e-9)
        self.lanes.setXRange(0, end_s, padding=0.01)
        self._draw_kv(instances)
        self._draw_utilization(instances, state.makespan_s)

    def _draw_kv(self, instances) -> None:
        named = len(instances) <= LEGEND_MAX_INSTANCES
        high = 0.0
        for inst in instances:
            its = inst.iterations
            if not its:
                continue
            x = np.fromiter((r.end_s for r in its), float, len(its))
            y = np.fromiter((100 * r.kv_usage for r in its), float, len(its))
            high = max(high, float(y.max()))
            curve = self.kv.plot(x, y, pen=pg.mkPen(color(inst.index), width=1.5),
                                 name=lane_label(inst.index, inst.role).rsplit(" (", 1)[0]
                                 if named else None)
            self.kv_curves.append(curve)
        # a big pool may stay nearly empty: scale to what was used, legend band above it
        self.kv.setYRange(0, min(100.0, max(1.0, high) * 1.6), padding=0)

    def _draw_utilization(self, instances, makespan_s: float) -> None:
        pct = [100 * inst.utilization(makespan_s) for inst in instances]
        self.util_bars.setOpts(x0=[0.0] * len(pct), x1=pct,
                               y=[float(i.index) for i in instances], height=BAR_HEIGHT)
        for inst, value in zip(instances, pct, strict=True):
            inside = value > 50  # the figure inside a long bar, beside a short one
            text = pg.TextItem(f"{value:.0f} %", color="#FFFFFF" if inside else "#222222",
                               anchor=(1, 0.5) if inside else (0, 0.5))
            text.setPos(value - 1 if inside else value + 1, inst.index)
            self.util.addItem(text)
            self.util_text.append(text)
        self.util.getViewBox().setLimits(xMin=0, xMax=100)
