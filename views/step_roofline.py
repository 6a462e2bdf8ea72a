"""Ops on the roofline: one dot per op name and shapes (`OpRow`), at its arithmetic intensity
F / B and achieved F / t, its area proportional to its time t (the largest op's dot
`MAX_DOT_PX` across), one colour and legend entry per series (an execution, or a trace), under
the roofs it is set against (solid: measured, dashed: a preset's). An op not costed (a fused
kernel) has no place on it: the title counts them.

The roofs, axes and hover are `RooflinePlot`'s; this plot draws its own sized dots.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from PySide6.QtGui import QColor

from inferlab.engines.labs.step.op_rows import OpRow
from inferlab.engines.roofline.formulas import knee_intensity, roofline_curve
from inferlab.views.roofline_plot import RoofLine, RooflinePlot, RooflinePoint, RooflineScene
from inferlab.views.style import color, pen

MIN_DOT_PX = 5.0
MAX_DOT_PX = 26.0


def dot_sizes(times_s: Sequence[float], largest_s: float) -> np.ndarray:
    """Dot diameters in pixels: area ∝ time (diameter ∝ √t), the largest MAX_DOT_PX, none
    below MIN_DOT_PX."""
    t = np.asarray(times_s, dtype=float)
    if largest_s <= 0 or len(t) == 0:
        return np.full(len(t), MIN_DOT_PX)
    return np.maximum(MAX_DOT_PX * np.sqrt(np.clip(t, 0, None) / largest_s), MIN_DOT_PX)


def _point(row: OpRow) -> RooflinePoint:
    of_roof = row.of_roof
    detail = (f"{row.calls} calls, {row.time_s * 1e6:,.1f} µs"
              + ("" if of_roof is None else f", {of_roof:.0%} of its roof time"))
    return RooflinePoint(row.name, row.series, row.flops, row.bytes, row.flops_per_s, True,
                         detail)


class OpsRoofline(RooflinePlot):
    """Draws OpRows under RoofLines (`draw`); `series` keeps each series' colour across
    draws."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMinimumSize(240, 180)
        self.dots: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def draw(self, rows: Sequence[OpRow], roofs: Sequence[RoofLine],  # type: ignore[override]
             title: str = "Ops on the roofline") -> None:
        plotted = [r for r in rows if r.plottable]
        left_out = len(rows) - len(plotted)
        points = tuple(_point(r) for r in plotted)
        self.scene_record = RooflineScene(tuple(roofs), points, title)
        self.item.clear()
        self.legend.clear()
        self.dots = {}
        note = f" ({left_out} not costed, not shown)" if left_out else ""
        self.item.setTitle(f"{title}{note}", size="10pt")
        intensities = [p.intensity for p in points]
        knees = [knee_intensity(r.peak_flops, r.bw_bytes_per_s) for r in roofs]
        lo = min(intensities + knees + [1.0]) / 4
        hi = max(intensities + knees + [16.0]) * 4
        for index, roof in enumerate(roofs):
            x, y = roofline_curve(roof.peak_flops, roof.bw_bytes_per_s, lo, hi, 256)
            self.item.plot(x, y, pen=pen(color(7 if roof.measured else 9 + index),
                                         2.0 if roof.measured else 1.5,
                                         dashed=not roof.measured), name=roof.label)
        largest = max((r.time_s for r in plotted), default=0.0)
        series = list(dict.fromkeys(r.series for r in rows))
        for index, name in enumerate(series):
            mine = [r for r in plotted if r.series == name]
            if not mine:
                continue
            x = np.array([r.intensity for r in mine])
            y = np.array([r.flops_per_s for r in mine])
            sizes = dot_sizes([r.time_s for r in mine], largest)
            self.dots[name] = (x, y, sizes)
            c = color(index)
            self.item.plot(x, y, pen=None, symbol="o", symbolSize=sizes,
                           symbolBrush=_translucent(c), symbolPen=pen(c, 1.0), name=name)
        if not points and not roofs:
            return
        ys = [p.flops_per_s for p in points] + [r.peak_flops for r in roofs]
        self.item.setXRange(math.log10(lo), math.log10(hi), padding=0.02)
        self.item.setYRange(math.log10(min(ys) / 3), math.log10(max(ys) * 3), padding=0.02)


def _translucent(hex_color: str, alpha: int = 150) -> QColor:
    c = QColor(hex_color)
    c.setAlpha(alpha)
    return c
