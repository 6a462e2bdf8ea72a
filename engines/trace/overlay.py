"""The plots of two snapshots overlaid: what a lab's comparison draws, as plain series.

A lab describes ONE snapshot's plots (`Plot`: a title, axis labels with units, log flags,
its `Curve`s of x and y numbers); `overlay(plots_a, plots_b)` pairs the two sides' plots by
title into `OverlayPlot`s whose curves carry their side, "A" or "B", which a view draws in
two fixed colours. A plot only one side has is kept (its curves are that side's). Curves
along categories (one point per linear layer, say) give `x_ticks`, the category at x = 0,
1, …; two sides with different categories are laid on the union of both, A's order first.

`LabOverlay` is one lab's plots in a comparison, or the message saying why it has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

SIDES = ("A", "B")
STYLES = ("line", "points")
"""line: a polyline (a staircase with `steps`: y[i] held from x[i] to x[i + 1]; dashed with
`dashed`, for a second kind of curve in one plot); points: markers only."""


@dataclass(frozen=True, eq=False)
class Curve:
    """One series: x and y (float64, equal lengths), its legend name, how it is drawn."""

    name: str
    x: np.ndarray
    y: np.ndarray
    style: str = "line"
    steps: bool = False
    dashed: bool = False
    side: str = ""  # "A" or "B" once overlaid

    def __post_init__(self) -> None:
        x = np.asarray(self.x, dtype=np.float64).reshape(-1)
        y = np.asarray(self.y, dtype=np.float64).reshape(-1)
        if x.shape != y.shape:
            raise ValueError(f"curve {self.name!r}: {x.size} x values, {y.size} y values")
        if self.style not in STYLES:
            raise ValueError(f"curve {self.name!r}: style {self.style!r}, expected one of "
                             f"{', '.join(STYLES)}")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)

    def __len__(self) -> int:
        return int(self.x.size)


@dataclass(frozen=True)
class Plot:
    """One plot of one snapshot. Log axes draw only positive values (the view drops the
    rest); labels carry the unit, e.g. "TTFT (ms)"."""

    title: str
    x_label: str
    y_label: str
    curves: tuple[Curve, ...]
    log_x: bool = False
    log_y: bool = False
    x_ticks: tuple[str, ...] = ()


@dataclass(frozen=True)
class OverlayPlot(Plot):
    """A plot with both sides' curves (each curve's `side` set), A's first."""

    only: str = ""  # "A" or "B" when one side has no such plot

    def side(self, side: str) -> tuple[Curve, ...]:
        return tuple(c for c in self.curves if c.side == side)


@dataclass(frozen=True)
class LabOverlay:
    """One lab's overlaid plots in a comparison, or (`plots` empty) the `message` why not."""

    lab: str
    plots: tuple[OverlayPlot, ...] = ()
    message: str = ""


def overlay(plots_a: Sequence[Plot], plots_b: Sequence[Plot]) -> tuple[OverlayPlot, ...]:
    """A's and B's plots paired by title (A's order, then B's own), curves sided."""
    by_title_b = {p.title: p for p in plots_b}
    titles = list(dict.fromkeys([*(p.title for p in plots_a), *(p.title for p in plots_b)]))
    by_title_a = {p.title: p for p in plots_a}
    return tuple(_pair(by_title_a.get(t), by_title_b.get(t)) for t in titles)


def _pair(a: Plot | None, b: Plot | None) -> OverlayPlot:
    base = a if a is not None else b
    ticks = tuple(dict.fromkeys([*(a.x_ticks if a else ()), *(b.x_ticks if b else ())]))
    curves: list[Curve] = []
    for side, plot in zip(SIDES, (a, b), strict=True):
        if plot is not None:
            curves += [replace(_on_ticks(c, plot.x_ticks, ticks), side=side)
                       for c in plot.curves]
    return OverlayPlot(base.title, base.x_label, base.y_label, tuple(curves), base.log_x,
                       base.log_y, ticks, only="" if a and b else ("A" if a else "B"))


def _on_ticks(curve: Curve, own: tuple[str, ...], union: tuple[str, ...]) -> Curve:
    """`curve` with its category positions (in `own`) moved to theirs in `union`."""
    if not own or own == union:
        return curve
    where = {name: i for i, name in enumerate(union)}
    index = curve.x.astype(np.int64)
    if index.size and (index.min() < 0 or index.max() >= len(own)):
        raise ValueError(f"curve {curve.name!r}: x outside its {len(own)} categories")
    moved = np.array([where[own[i]] for i in index], dtype=np.float64)
    return replace(curve, x=moved)
