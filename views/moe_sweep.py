"""The MoE lab's B sweep (one `BatchPoint` per batch): the weights one decode step reads
against B, measured (the router's distinct experts) beside the closed form (dense part +
E·(1 − (1 − k/E)^B) experts per MoE layer), between the dense part and all weights; and the
time per step against B (the decode step, the MoE layers grouped and per token). The x-axis
is log₂ B: the positions are log₂ B, the ticks name B."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from inferlab.views.style import fixed_plot, pen

MIB = 2**20
MEASURED = "#0072B2"
FORMULA = "#D55E00"
BOUND = "#7F7F7F"
STEP = "#000000"
GROUPED = "#0072B2"
PER_TOKEN = "#CC79A7"
LINE_LABEL = {"position": 0.98, "color": BOUND, "anchors": [(1, 1), (1, 1)]}
"""A bound line's name, right-aligned above it."""
B_LABEL = "batch B (tokens per step, log₂ scale)"


def log2_ticks(batches) -> list[tuple[float, str]]:
    """Ticks at log₂ B naming B, for every batch of the sweep."""
    return [(math.log2(b), str(b)) for b in sorted(set(batches))]


def _plot(widget: pg.PlotWidget, title: str, left: str) -> pg.PlotItem:
    return fixed_plot(widget, title, left, B_LABEL)


def _curve(p: pg.PlotItem, colour: str, name: str, dashed: bool = False, symbol: str = "o"):
    return p.plot([], [], pen=pen(colour, 2, dashed=dashed), symbol=symbol, symbolSize=6,
                  symbolBrush=colour, symbolPen=None, name=name)


class SweepBytes(pg.PlotWidget):
    """Weights read per decode step (MiB) against B."""

    def __init__(self, parent=None):
        super().__init__(parent)
        p = _plot(self, "Weights read per step", "weights read (MiB)")
        self.legend = p.addLegend(offset=(5, 5), labelTextSize="8pt")
        self.measured = _curve(p, MEASURED, "measured")
        self.formula = _curve(p, FORMULA, "closed form", True, "t")
        self.total = pg.InfiniteLine(0.0, angle=0, pen=pg.mkPen(BOUND, width=1,
                                                                   style=Qt.DotLine),
                                     label="all weights", labelOpts=LINE_LABEL)
        self.dense = pg.InfiniteLine(0.0, angle=0, pen=pg.mkPen(BOUND, width=1,
                                                                   style=Qt.DashDotLine),
                                     label="dense part", labelOpts=LINE_LABEL)
        for line in (self.total, self.dense):
            p.addItem(line)

    def draw(self, points, total_bytes: float, dense_bytes: float) -> None:
        x = [math.log2(pt.batch) for pt in points]
        measured = np.array([pt.weight_bytes_per_step for pt in points]) / MIB
        formula = np.array([pt.weight_bytes_per_step_formula for pt in points]) / MIB
        self.measured.setData(x, measured)
        self.formula.setData(x, formula)
        self.total.setValue(total_bytes / MIB)
        self.dense.setValue(dense_bytes / MIB)
        p = self.getPlotItem()
        p.getAxis("bottom").setTicks([log2_ticks([pt.batch for pt in points]), []])
        if x:
            p.setXRange(min(x) - 0.3, max(x) + 0.3, padding=0)
        p.setYRange(0, max(total_bytes / MIB, 1e-9) * 1.6, padding=0)


class SweepTimes(pg.PlotWidget):
    """Time per decode step (ms) against B, and over its MoE layers the grouped product
    and the per-token loop."""

    def __init__(self, parent=None):
        super().__init__(parent)
        p = _plot(self, "Time per step", "time (ms)")
        self.legend = p.addLegend(offset=(5, 5), labelTextSize="8pt")
        self.step = _curve(p, STEP, "decode step")
        self.grouped = _curve(p, GROUPED, "MoE grouped", symbol="s")
        self.per_token = _curve(p, PER_TOKEN, "MoE per-token", True, "t")

    def draw(self, points) -> None:
        x = [math.log2(pt.batch) for pt in points]
        self.step.setData(x, [pt.step_s * 1e3 for pt in points])
        self.grouped.setData(x, [pt.grouped_s * 1e3 for pt in points])
        self.per_token.setData(x, [pt.per_token_s * 1e3 for pt in points])
        p = self.getPlotItem()
        p.getAxis("bottom").setTicks([log2_ticks([pt.batch for pt in points]), []])
        if x:
            p.setXRange(min(x) - 0.3, max(x) + 0.3, padding=0)
            top = max(max(pt.step_s, pt.grouped_s, pt.per_token_s) for pt in points) * 1e3
            p.setYRange(0, max(top, 1e-6) * 1.45, padding=0)
