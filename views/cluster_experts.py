"""The cluster lab's expert-parallel figures, per MoE layer of an ep run (or a pd run of
EP > 1): the dispatch and combine all-to-alls' time on the link, summed over the run's
steps on the hottest GPU, and the GPUs' load imbalance (max / mean) before and after EPLB.
It draws the run's `MoELayerComm` records (engines/cluster/records.py); an empty tuple says
why there is nothing to draw.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from inferlab.views.style import fixed_plot, pen

DISPATCH = "#0072B2"
COMBINE = "#E69F00"
BEFORE = "#D55E00"
AFTER = "#009E73"
NOTHING = ("No expert-parallel layer in this run: choose the ep layout (or pd with e > 1) "
           "and a MoE model.")


class ClusterExperts(QWidget):
    """Two plots over the MoE layers: all-to-all time (stacked dispatch + combine, ms) and
    load imbalance before / after EPLB, with the ideal 1.0."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.note = QLabel(NOTHING)
        self.note.setWordWrap(True)
        self.comm = pg.PlotWidget()
        p = fixed_plot(self.comm, "All-to-all time per MoE layer, summed over the run",
                       "time on the link (ms)", "MoE layer")
        p.addLegend(offset=(-5, 5), labelTextSize="8pt")
        self.dispatch = pg.BarGraphItem(x=[], height=[], width=0.8, brush=DISPATCH,
                                        pen=pg.mkPen(None), name="dispatch (FP8)")
        self.combine = pg.BarGraphItem(x=[], y0=[], height=[], width=0.8, brush=COMBINE,
                                       pen=pg.mkPen(None), name="combine (BF16)")
        p.addItem(self.dispatch)
        p.addItem(self.combine)
        self.balance = pg.PlotWidget()
        q = fixed_plot(self.balance, "GPU load imbalance per MoE layer",
                       "max / mean load over the GPUs", "MoE layer")
        q.addLegend(offset=(-5, 5), labelTextSize="8pt")
        self.before = q.plot([], [], pen=pen(BEFORE, 2), symbol="o", symbolSize=5,
                             symbolBrush=BEFORE, name="before EPLB")
        self.after = q.plot([], [], pen=pen(AFTER, 2), symbol="s", symbolSize=5,
                            symbolBrush=AFTER, name="after EPLB")
        q.addItem(pg.InfiniteLine(1.0, angle=0, pen=pg.mkPen("#555555", style=Qt.DashLine),
                                  label="ideal 1.0", labelOpts={"position": 0.05,
                                                                "color": "#555555"}))
        layout = QVBoxLayout(self)
        layout.addWidget(self.note)
        layout.addWidget(self.comm, 1)
        layout.addWidget(self.balance, 1)
        self.layers = np.zeros(0)

    def draw(self, moe_layers) -> None:
        """`moe_layers`: the run's MoELayerComm records (empty: not an expert-parallel run)."""
        self.layers = np.array([m.layer for m in moe_layers], dtype=np.float64)
        dispatch_ms = np.array([m.dispatch_s * 1e3 for m in moe_layers])
        combine_ms = np.array([m.combine_s * 1e3 for m in moe_layers])
        self.dispatch.setOpts(x=self.layers, height=dispatch_ms)
        self.combine.setOpts(x=self.layers, y0=dispatch_ms, height=combine_ms)
        self.before.setData(self.layers, [m.imbalance for m in moe_layers])
        self.after.setData(self.layers, [m.imbalance_eplb for m in moe_layers])
        if not len(self.layers):
            self.note.setText(NOTHING)
            return
        total_ms = float(dispatch_ms.sum() + combine_ms.sum())
        worst = max(moe_layers, key=lambda m: m.imbalance)
        self.note.setText(
            f"{len(moe_layers)} MoE layers: {total_ms:,.1f} ms on the link over the run "
            f"({dispatch_ms.sum():,.1f} dispatch, {combine_ms.sum():,.1f} combine). Hottest "
            f"layer {worst.layer}: imbalance {worst.imbalance:.2f} before EPLB, "
            f"{worst.imbalance_eplb:.2f} after.")
        top = float((dispatch_ms + combine_ms).max())
        self.comm.getPlotItem().setYRange(0, 1.3 * top if top > 0 else 1.0, padding=0)
        self.comm.getPlotItem().enableAutoRange(axis="x")  # headroom above for the legend
        self.balance.getPlotItem().enableAutoRange()
