"""Log axes (views/axes.py): ticks SI-labelled at 1×, 2× and 5× a decade, the minor ticks
between them left unlabelled (a two-decade axis read 300400500… before), every tick
labelled on a range under a decade; the overlaid plots use the same axis."""

from __future__ import annotations

import math

import pyqtgraph as pg

from inferlab.engines.trace.overlay import Curve, Plot, overlay
from inferlab.views.axes import LogSIAxis, labelled
from inferlab.views.overlay_plots import OverlayPlot


def shown(axis: LogSIAxis, low: float, high: float) -> list[str]:
    """The labels the axis draws between `low` and `high` (log mode, 600 px long)."""
    labels = []
    for spacing, values in axis.tickValues(math.log10(low), math.log10(high), 600):
        labels += [t for t in axis.tickStrings(values, 1.0, spacing) if t]
    return labels


def test_a_two_decade_axis_is_labelled_at_1_2_5_only(qtbot):
    widget = pg.PlotWidget(axisItems={"bottom": LogSIAxis("bottom")})
    qtbot.addWidget(widget)
    widget.getPlotItem().setLogMode(x=True)
    axis = widget.getPlotItem().getAxis("bottom")
    labels = shown(axis, 90, 11_000)
    assert set(labels) == {"100", "200", "500", "1k", "2k", "5k", "10k"}
    # every minor tick is still there, unlabelled
    ticks = [v for _spacing, values in axis.tickValues(2, 4, 600) for v in values]
    assert any(round(10 ** (v % 1), 6) == 3.0 for v in ticks)
    # under a decade there are no two of 1×, 2×, 5×: its own ticks keep their labels
    assert len(shown(axis, 250, 450)) >= 2
    assert labelled([math.log10(3), math.log10(4)]) == [True, True]
    assert labelled([0.0, math.log10(3), math.log10(5)]) == [True, False, True]


def test_the_overlaid_plots_draw_their_log_axes_with_it(qtbot):
    (record,) = overlay([Plot("t", "x", "y", (Curve("c", [1, 100], [1, 2]),), log_x=True,
                              log_y=True)], [])
    widget = OverlayPlot(record)
    qtbot.addWidget(widget)
    item = widget.plot_widget.getPlotItem()
    assert type(item.getAxis("bottom")) is LogSIAxis and type(item.getAxis("left")) is LogSIAxis
