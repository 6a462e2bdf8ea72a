"""Attention timed on this device at growing N: naive torch, torch SDPA and the tiled kernels,
log-log, with a button that asks the lab to measure (a worker: it takes a while)."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

from inferlab.engines.labs.attention.section import TIMING_SERIES
from inferlab.views.axes import LogSIAxis
from inferlab.views.style import color, style_plot

SERIES = TIMING_SERIES


class TimingsPlot(QWidget):
    measure_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.plot = pg.PlotWidget(axisItems={"left": LogSIAxis("left")})
        self.item = self.plot.getPlotItem()
        self.item.setLogMode(x=True, y=True)
        style_plot(self.item)
        self.item.setLabel("bottom", "N (tokens)")
        self.item.setLabel("left", "time per call (s)")
        self.item.setTitle("timed on this device (d = 64, fp32)", size="10pt")
        self.item.getAxis("bottom").setTicks(
            [[(math.log10(4 ** i), f"{4 ** i:,}") for i in range(4, 9)], []])  # 256 … 65,536
        self.item.hideButtons()
        self.legend = self.item.addLegend(offset=(1, 1), labelTextSize="8pt")
        self._empty_range()
        self.button = QPushButton("Time on this device")
        self.button.setToolTip("Time naive torch, torch SDPA and the tiled kernels at N = 256 "
                               "… 16,384 on one thread (a minute or two)")
        self.button.clicked.connect(self.measure_requested)
        self.note = QLabel("Not measured yet: the button times them here.")
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #555")
        self.note.setContentsMargins(4, 0, 4, 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.note)
        layout.addWidget(self.button)

    def _empty_range(self) -> None:
        self.item.setXRange(math.log10(256), math.log10(16384))
        self.item.setYRange(-4, 1)

    def set_read_only(self, read_only: bool) -> None:
        self.button.setEnabled(not read_only)

    def set_busy(self, busy: bool, text: str = "") -> None:
        self.button.setEnabled(not busy)
        self.note.setText(text)

    def draw(self, rows) -> None:
        self.item.clear()
        self.legend.clear()
        if not rows:
            self.note.setText("Not measured yet: the button times them here.")
            self._empty_range()
            return
        for i, (key, label) in enumerate(SERIES):
            pts = [(r["n"], r[key]) for r in rows if r.get(key)]
            if pts:
                x, y = zip(*pts, strict=True)
                self.item.plot(x, y, pen=pg.mkPen(color(i), width=2), symbol="o",
                               symbolSize=6, symbolBrush=color(i), name=label)
        self.item.autoRange()  # the empty plot's fixed range is off while data is shown
        oom = [r["n"] for r in rows if r.get("naive_error")]
        self.note.setText(
            f"naive runs out of memory at N ≥ {min(oom):,} (S and P: "
            f"{2 * min(oom) ** 2 * 4 / 2**30:.1f} GiB)" if oom else
            f"naive's S and P at N = {rows[-1]['n']:,}: "
            f"{rows[-1]['naive_sp_bytes'] / 2**30:.2f} GiB "
            f"(log₂ N = {math.log2(rows[-1]['n']):.0f})")
