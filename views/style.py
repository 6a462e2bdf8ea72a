"""Colours and pens shared by every view, so a device or a dtype keeps its colour everywhere."""

from __future__ import annotations

import pyqtgraph as pg

# Colour-blind-friendly (Okabe–Ito) first, then Tableau-like extras.
PALETTE = (
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442",
    "#000000", "#8C564B", "#7F7F7F", "#BCBD22", "#17BECF",
)


def nowrap(label: str) -> str:
    """A legend entry's text that a wrapping QLabel never breaks (its spaces non-breaking):
    the entries wrap between them, never inside one."""
    return label.replace(" ", "&nbsp;")


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def pen(index_or_color, width: float = 1.0, dashed: bool = False):
    c = color(index_or_color) if isinstance(index_or_color, int) else index_or_color
    from PySide6.QtCore import Qt

    return pg.mkPen(c, width=width, style=Qt.DashLine if dashed else Qt.SolidLine)


def style_plot(plot: pg.PlotItem) -> None:
    """Grid, readable fonts, no auto-SI-prefix junk on log axes."""
    plot.showGrid(x=True, y=True, alpha=0.25)
    for name in ("left", "bottom"):
        axis = plot.getAxis(name)
        axis.enableAutoSIPrefix(False)


def fixed_plot(widget: pg.PlotWidget, title: str, left: str, bottom: str = "") -> pg.PlotItem:
    """A PlotWidget's plot styled (style_plot), titled and labelled, that shows figures
    rather than being explored: no mouse zoom, no auto-range button, a small minimum size."""
    p = widget.getPlotItem()
    style_plot(p)
    p.setTitle(title, size="10pt")
    if bottom:
        p.setLabel("bottom", bottom)
    p.setLabel("left", left)
    p.setMouseEnabled(x=False, y=False)
    p.hideButtons()
    widget.setMinimumSize(180, 150)
    return p
