"""Two snapshots' plots overlaid (engines.trace.overlay): A and B in two fixed colours.

`OverlayPlot` draws one plot: every curve in its side's colour (A orange, B blue, as the
batching lab's Compare tab has them; A wider, under B, so that where they agree both show),
dashed or as markers as the curve says, log axes labelled at 1-2-5 (views/axes.py), and
under it a legend naming side and curve. `LabOverlayPlots` is one lab's plots in a grid (or
its message: what the report renders as one image); `OverlayPlotsView` all labs' in a
scroll area, under a line saying which file is A and which is B.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QGridLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from inferlab.engines.trace.overlay import Curve, LabOverlay
from inferlab.engines.trace.overlay import OverlayPlot as PlotRecord
from inferlab.views.axes import LogSIAxis
from inferlab.views.style import color, pen, style_plot

SIDE_COLORS = {"A": color(1), "B": color(0)}
SIDE_WIDTHS = {"A": 3.0, "B": 1.5}
"""A is drawn first and wider, B over it: where the two runs agree A shows as B's rim."""
SIDE_SYMBOL_PX = {"A": 10, "B": 6}
TICK_LABELS_PX = 480  # the width tick labels along categories are spread over, at most
CHAR_PX = 7
COLUMNS = 2
PLOT_HEIGHT_PX = 280


def curve_points(curve: Curve, log_x: bool, log_y: bool) -> tuple[np.ndarray, np.ndarray]:
    """What is drawn of `curve`: a staircase for `steps` (y[i] from x[i] to x[i + 1]), the
    points a log axis cannot show (<= 0) and non-finite ones as gaps (NaN)."""
    x, y = curve.x, curve.y
    if curve.steps and x.size > 1:
        x, y = np.repeat(x, 2)[1:], np.repeat(y, 2)[:-1]
    bad = ~(np.isfinite(x) & np.isfinite(y))
    if log_x:
        bad |= ~(x > 0)
    if log_y:
        bad |= ~(y > 0)
    if bad.any():
        x, y = np.where(bad, np.nan, x), np.where(bad, np.nan, y)
    return x, y


def category_ticks(names) -> list[tuple[int, str]]:
    """Every k-th category's tick, k such that the labels fit TICK_LABELS_PX side by side,
    from the (k // 2)-th: a label centred on the first category would reach past the axis,
    which pyqtgraph then leaves out."""
    if not names:
        return []
    widest = CHAR_PX * max(len(n) for n in names) + 2 * CHAR_PX
    fit = max(1, TICK_LABELS_PX // widest)
    step = max(1, math.ceil(len(names) / fit))
    return [(i, name) for i, name in enumerate(names) if i % step == step // 2]


def legend_html(curves) -> str:
    """The legend under a plot: a sample of each curve (line, dashed, marker) in its side's
    colour and its name, "A: TTFT"."""
    entries = []
    for c in curves:
        sample = "●" if c.style == "points" else "╌╌" if c.dashed else "━━"
        name = f"{c.side}: {c.name}" if c.side else c.name
        entries.append(f"<span style='color:{SIDE_COLORS.get(c.side, '#7F7F7F')}'>"
                       f"<b>{sample}</b></span>&nbsp;{html.escape(name)}")
    return " &nbsp; ".join(entries)


class OverlayPlot(QWidget):
    """One overlaid plot (engines.trace.overlay.OverlayPlot): the plot, its legend under
    it (never over the curves)."""

    def __init__(self, record: PlotRecord, parent=None) -> None:
        super().__init__(parent)
        axes = {}
        if record.log_x:
            axes["bottom"] = LogSIAxis("bottom")
        if record.log_y:
            axes["left"] = LogSIAxis("left")
        self.plot_widget = pg.PlotWidget(background="w", axisItems=axes)
        self.record = record
        plot = self.plot_widget.getPlotItem()
        style_plot(plot)
        only = f" (only in {record.only})" if record.only else ""
        plot.setTitle(html.escape(record.title + only), color="#222", size="10pt")
        plot.setLabel("bottom", html.escape(record.x_label))
        plot.setLabel("left", html.escape(record.y_label))
        plot.setLogMode(x=record.log_x, y=record.log_y)
        self.items = [self._draw(plot, c) for c in record.curves]
        if record.x_ticks:
            plot.getAxis("bottom").setTicks([category_ticks(record.x_ticks)])
            plot.setXRange(-0.5, len(record.x_ticks) - 0.5, padding=0)
        self.legend = QLabel(legend_html(record.curves))
        self.legend.setTextFormat(self.legend.textFormat().RichText)
        self.legend.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 4)
        layout.setSpacing(0)
        layout.addWidget(self.plot_widget, 1)
        layout.addWidget(self.legend)
        self.setMinimumHeight(PLOT_HEIGHT_PX)

    def _draw(self, plot: pg.PlotItem, curve: Curve) -> pg.PlotDataItem:
        x, y = curve_points(curve, self.record.log_x, self.record.log_y)
        c = SIDE_COLORS.get(curve.side, "#7F7F7F")
        if curve.style == "points":
            return plot.plot(x, y, pen=None, symbol="o", symbolPen=None, symbolBrush=c,
                             symbolSize=SIDE_SYMBOL_PX.get(curve.side, 7))
        return plot.plot(x, y, pen=pen(c, SIDE_WIDTHS.get(curve.side, 2.0),
                                       dashed=curve.dashed), connect="finite")


class LabOverlayPlots(QWidget):
    """One lab's overlaid plots, COLUMNS to a row, or the message why it has none; `sides`
    (sides_html) heads them where nothing else says which file is A (the report's image)."""

    def __init__(self, lab: LabOverlay, sides: str = "", parent=None) -> None:
        super().__init__(parent)
        self.lab = lab
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        top = 0
        if sides:
            head = QLabel(sides)
            head.setTextFormat(head.textFormat().RichText)
            grid.addWidget(head, 0, 0, 1, COLUMNS)
            top = 1
        self.plots = [OverlayPlot(p) for p in lab.plots]
        for i, widget in enumerate(self.plots):
            grid.addWidget(widget, top + i // COLUMNS, i % COLUMNS)
        self.message = QLabel(lab.message)
        self.message.setWordWrap(True)
        self.message.setVisible(bool(lab.message))
        grid.addWidget(self.message, top + self.rows(), 0, 1, COLUMNS)

    def rows(self) -> int:
        return max(1, math.ceil(len(self.plots) / COLUMNS))


def sides_html(a_name: str, b_name: str) -> str:
    def e(text) -> str:
        return html.escape(str(text))

    return (f"<span style='color:{SIDE_COLORS['A']}'>■ <b>A</b></span> = {e(a_name)}, "
            f"<span style='color:{SIDE_COLORS['B']}'>■ <b>B</b></span> = {e(b_name)}")


class OverlayPlotsView(QWidget):
    """Every lab's overlaid plots, lab by lab, in a scroll area."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.sides = QLabel()
        self.sides.setTextFormat(self.sides.textFormat().RichText)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.sides)
        layout.addWidget(self.scroll, 1)
        self.labs: list[LabOverlayPlots] = []
        self.render((), "A", "B")

    def render(self, labs: Sequence[LabOverlay], a_name: str = "A", b_name: str = "B") -> None:
        self.sides.setText(sides_html(a_name, b_name))
        body = QWidget()
        column = QVBoxLayout(body)
        self.labs = []
        for lab in labs:
            title = QLabel(f"<b>{html.escape(lab.lab)}</b>")
            column.addWidget(title)
            widget = LabOverlayPlots(lab)
            column.addWidget(widget)
            self.labs.append(widget)
        if not labs:
            column.addWidget(QLabel("No lab in both snapshots draws a comparison plot."))
        column.addStretch(1)
        self.scroll.setWidget(body)  # the previous body is deleted with its plots

    def plot_count(self) -> int:
        return sum(len(w.plots) for w in self.labs)
