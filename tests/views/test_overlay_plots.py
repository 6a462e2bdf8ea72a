"""The overlaid plots' view: A and B in their two fixed colours (A wider, beneath), dashed and
marker curves as described, a legend naming side and curve under each plot, staircases and
log axes drawn from the right points, a lab's message in place of plots."""

from __future__ import annotations

import numpy as np

from inferlab.engines.trace.overlay import Curve, LabOverlay, Plot, overlay
from inferlab.views.overlay_plots import (
    SIDE_COLORS,
    LabOverlayPlots,
    OverlayPlot,
    OverlayPlotsView,
    category_ticks,
    curve_points,
)


def cdf_pair():
    a = [Plot("TTFT CDF", "TTFT (ms)", "fraction", (Curve("TTFT", [10, 20], [0.5, 1.0],
                                                          steps=True),), log_x=True),
         Plot("ops", "op", "µs", (Curve("host", [0, 1], [3, 4], "points"),
                                  Curve("board", [0, 1], [5, 6], dashed=True)),
              x_ticks=("CONV#0", "FC#1"))]
    b = [Plot("TTFT CDF", "TTFT (ms)", "fraction", (Curve("TTFT", [5, 40], [0.5, 1.0],
                                                          steps=True),), log_x=True)]
    return overlay(a, b)


def test_each_side_has_its_colour_and_the_legend_names_both(qtbot):
    cdf, ops = cdf_pair()
    widget = OverlayPlot(cdf)
    qtbot.addWidget(widget)
    pens = [item.opts["pen"] for item in widget.items]
    assert [p.color().name().upper() for p in pens] == [SIDE_COLORS["A"], SIDE_COLORS["B"]]
    assert pens[0].widthF() > pens[1].widthF()  # A beneath B shows where they agree
    text = widget.legend.text()
    assert "A: TTFT" in text and "B: TTFT" in text
    assert widget.plot_widget.getPlotItem().ctrl.logXCheck.isChecked()
    widget = OverlayPlot(ops)
    qtbot.addWidget(widget)
    assert "(only in A)" in widget.plot_widget.getPlotItem().titleLabel.text
    marker, dashed = widget.items
    assert marker.opts["pen"] is None and marker.opts["symbol"] == "o"
    assert dashed.opts["pen"].style() != pens[0].style()
    assert widget.plot_widget.getPlotItem().getAxis("bottom")._tickLevels == \
        [[(0, "CONV#0"), (1, "FC#1")]]


def test_a_staircase_and_log_axes_draw_the_right_points():
    x, y = curve_points(Curve("c", [1, 2, 4], [0.2, 0.5, 1.0], steps=True), False, False)
    assert x.tolist() == [1, 2, 2, 4, 4] and y.tolist() == [0.2, 0.2, 0.5, 0.5, 1.0]
    x, y = curve_points(Curve("c", [0, 1, 10], [5, np.nan, -1]), True, True)
    assert np.isnan(x[0]) and np.isnan(y[1]) and np.isnan(y[2])  # gaps, never log(0)
    assert curve_points(Curve("c", [3], [4], steps=True), False, False)[0].tolist() == [3]


def test_category_labels_are_thinned_to_fit():
    names = [f"layers.{i}.gate_up" for i in range(30)]
    ticks = category_ticks(names)
    assert 2 <= len(ticks) <= 5 and ticks[0][1] == names[ticks[0][0]]
    assert category_ticks(["a", "b"]) == [(0, "a"), (1, "b")]


def test_the_view_lists_each_labs_plots_or_its_message(qtbot):
    view = OverlayPlotsView()
    qtbot.addWidget(view)
    view.render([LabOverlay("batching", cdf_pair()),
                 LabOverlay("kv", message="cannot draw: B (b.json): labs.kv.state.steps")],
                "a.json", "b<&>.json")
    assert view.plot_count() == 2
    assert "a.json" in view.sides.text() and "b&lt;&amp;&gt;.json" in view.sides.text()
    kv = view.labs[1]
    assert kv.plots == [] and "labs.kv.state.steps" in kv.message.text()
    assert not kv.message.isHidden()
    view.render([])
    assert view.plot_count() == 0 and view.labs == []


def test_a_lab_grid_renders_with_which_file_is_a(qtbot):
    lab = LabOverlayPlots(LabOverlay("batching", cdf_pair()), "A = a.json")
    qtbot.addWidget(lab)
    lab.resize(900, 300 * lab.rows())
    assert lab.rows() == 1 and not lab.grab().isNull()
