"""Two snapshots' plots paired into overlays: by title, each curve sided, a plot one side
lacks kept and marked, categories laid on the union of both sides'."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.engines.trace.overlay import Curve, Plot, overlay


def plot(title: str, *curves: Curve, ticks=()) -> Plot:
    return Plot(title, "x (s)", "y (%)", tuple(curves), x_ticks=tuple(ticks))


def test_plots_pair_by_title_and_each_curve_knows_its_side():
    a = [plot("cdf", Curve("ttft", [1, 2], [0.5, 1.0])), plot("only A", Curve("k", [0], [1]))]
    b = [plot("only B", Curve("k", [0], [2])), plot("cdf", Curve("ttft", [3, 4], [0.5, 1.0]))]
    got = overlay(a, b)
    assert [(p.title, p.only) for p in got] == [("cdf", ""), ("only A", "A"), ("only B", "B")]
    cdf = got[0]
    assert [(c.side, c.name) for c in cdf.curves] == [("A", "ttft"), ("B", "ttft")]
    assert cdf.side("A")[0].x.tolist() == [1.0, 2.0]
    assert cdf.side("B")[0].x.tolist() == [3.0, 4.0]
    assert [c.side for c in got[2].curves] == ["B"]


def test_a_side_compared_with_itself_gives_identical_curves():
    a = [plot("p", Curve("one", [0, 1, 2], [3, 4, 5], steps=True),
              Curve("two", [1], [9], "points"))]
    (p,) = overlay(a, a)
    for ca, cb in zip(p.side("A"), p.side("B"), strict=True):
        assert (ca.name, ca.style, ca.steps) == (cb.name, cb.style, cb.steps)
        assert np.array_equal(ca.x, cb.x) and np.array_equal(ca.y, cb.y)


def test_categories_of_both_sides_are_laid_on_their_union():
    a = [plot("sqnr", Curve("int8", [0, 1], [40, 41]), ticks=("q", "k"))]
    b = [plot("sqnr", Curve("int8", [0, 1], [30, 31]), ticks=("k", "v"))]
    (p,) = overlay(a, b)
    assert p.x_ticks == ("q", "k", "v")
    assert p.side("A")[0].x.tolist() == [0.0, 1.0]  # q, k
    assert p.side("B")[0].x.tolist() == [1.0, 2.0]  # k, v
    bad = [plot("sqnr", Curve("int8", [5], [1]), ticks=("z",))]
    with pytest.raises(ValueError, match="outside its 1 categories"):
        overlay(a, bad)


def test_a_curve_refuses_what_cannot_be_drawn():
    with pytest.raises(ValueError, match="2 x values, 1 y values"):
        Curve("c", [1, 2], [1])
    with pytest.raises(ValueError, match="style 'bars'"):
        Curve("c", [1], [1], "bars")
    assert overlay([], []) == ()
