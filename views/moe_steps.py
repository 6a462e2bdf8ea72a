"""The MoE lab's per-step plots: the distinct experts one decode step touches per MoE layer
beside the closed form E·(1 − (1 − k/E)^B) and E itself, and the grouped expert product
against the per-token loop (milliseconds over the MoE layers, the speed-up written above).
They draw a step record's numbers; none starts work."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from inferlab.views.moe_routing import index_ticks
from inferlab.views.style import fixed_plot, pen

MEASURED = "#009E73"
FORMULA = "#D55E00"
ALL = "#7F7F7F"
GROUPED = "#0072B2"
PER_TOKEN = "#CC79A7"


class DistinctExperts(pg.PlotWidget):
    """Bars: distinct experts the step's tokens chose, per MoE layer; dashed: the uniform
    router's expectation E·(1 − (1 − k/E)^B); dotted: E (every expert read)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        p = fixed_plot(self, "Experts touched", "distinct experts", "MoE layer")
        self.legend = p.addLegend(offset=(-5, 5), labelTextSize="8pt")
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.6, brush=MEASURED,
                                    pen=pg.mkPen(None))
        p.addItem(self.bars)
        self.legend.addItem(self.bars, "router")
        self.formula = pg.InfiniteLine(0.0, angle=0, pen=pen(FORMULA, 2, dashed=True))
        p.addItem(self.formula)
        self.formula_key = p.plot([], [], pen=pen(FORMULA, 2, dashed=True),
                                  name="E·(1 − (1 − k/E)^B)")
        self.formula_label = self.legend.items[-1][1]
        self.every = pg.InfiniteLine(0.0, angle=0, pen=pg.mkPen(ALL, width=1, style=Qt.DotLine),
                                     label="E", labelOpts={"position": 0.98, "color": ALL,
                                                           "anchors": [(1, 1), (1, 1)]})
        p.addItem(self.every)
        self.heights = np.zeros(0)

    def draw(self, distinct, layers: list[int], formula: float, n_experts: int) -> None:
        self.heights = np.asarray(distinct, dtype=np.float64)
        n = len(self.heights)
        self.bars.setOpts(x=np.arange(n) + 0.5, height=self.heights)
        self.formula.setValue(float(formula))
        self.every.setValue(float(n_experts))
        self.every.label.setFormat(f"E = {n_experts}")
        self.formula_label.setText(f"E·(1 − (1 − k/E)^B) = {formula:.2f}")
        p = self.getPlotItem()
        p.getAxis("bottom").setTicks([index_ticks([str(i) for i in layers]), []])
        p.setXRange(0, max(n, 1), padding=0.02)
        p.setYRange(0, max(n_experts, 1) * 2.4, padding=0)

    def clear_data(self) -> None:
        self.heights = np.zeros(0)
        self.bars.setOpts(x=[], height=[])


class GroupedTimes(pg.PlotWidget):
    """Two bars in ms over the step's MoE layers: the grouped expert product (tokens
    gathered per expert, each expert's weights read once) and the per-token loop (every
    token's k experts one at a time); the speed-up per-token / grouped written above."""

    NAMES = ("grouped", "per-token loop")

    def __init__(self, parent=None):
        super().__init__(parent)
        p = fixed_plot(self, "Grouped vs per-token", "MoE layers' time (ms)")
        self.bars = pg.BarGraphItem(x=[0.5, 1.5], height=[0, 0], width=0.6,
                                    brushes=[GROUPED, PER_TOKEN], pen=pg.mkPen(None))
        p.addItem(self.bars)
        p.getAxis("bottom").setTicks([[(0.5, self.NAMES[0]), (1.5, self.NAMES[1])], []])
        p.setXRange(0, 2, padding=0.02)
        self.speedup = pg.TextItem(anchor=(0.5, 0.0), color="#222222")
        p.addItem(self.speedup)
        self.heights_ms = np.zeros(2)

    def draw(self, grouped_s: float, per_token_s: float) -> None:
        self.heights_ms = np.array([grouped_s, per_token_s]) * 1e3
        self.bars.setOpts(height=self.heights_ms)
        top = max(float(self.heights_ms.max()), 1e-6)
        ratio = per_token_s / grouped_s if grouped_s > 0 else float("nan")
        self.speedup.setText(f"grouped {ratio:.2f}× faster" if ratio >= 1
                             else f"grouped {1 / ratio:.2f}× slower" if ratio > 0
                             else "")
        self.speedup.setPos(1.0, top * 1.38)
        p = self.getPlotItem()
        p.setYRange(0, top * 1.4, padding=0)

    def clear_data(self) -> None:
        self.heights_ms = np.zeros(2)
        self.bars.setOpts(height=self.heights_ms)
        self.speedup.setText("")
