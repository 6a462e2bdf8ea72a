"""Log-log roofline plot: roofs (measured and datasheet), knees, analytic and measured points."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Signal
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QToolTip

from inferlab.engines.roofline.formulas import knee_intensity, roofline_curve
from inferlab.engines.roofline.units import format_flops
from inferlab.views.axes import LogSIAxis
from inferlab.views.style import color, pen, style_plot

HOVER_RADIUS_PX = 12


@dataclass(frozen=True)
class RoofLine:
    """One device's roof: `peak_flops` for the plotted dtype and its memory bandwidth."""

    label: str
    peak_flops: float
    bw_bytes_per_s: float
    measured: bool = False


@dataclass(frozen=True)
class RooflinePoint:
    """An operation on the plot at (FLOPs/bytes, FLOP/s): achieved if measured, else predicted."""

    label: str
    series: str  # legend group, e.g. "decode (model)", "measured matmul"
    flops: float
    bytes_moved: float
    flops_per_s: float
    measured: bool
    detail: str = ""

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes_moved


@dataclass(frozen=True)
class RooflineScene:
    roofs: tuple[RoofLine, ...]
    points: tuple[RooflinePoint, ...]
    title: str = "Roofline"


SYMBOLS = ("o", "t", "s", "d", "star", "p", "h", "t1")


class RooflinePlot(pg.PlotWidget):
    """Draws a RooflineScene. Emits `point_hovered(point or None)` as the mouse moves."""

    point_hovered = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent=parent, axisItems={"left": LogSIAxis("left", unit="FLOP/s"),
                                                   "bottom": LogSIAxis("bottom")})
        self.item = self.getPlotItem()
        self.item.setLogMode(x=True, y=True)
        self.item.setLabel("bottom", "arithmetic intensity I (FLOP/byte)")
        self.item.setLabel("left", "attainable performance (FLOP/s)")
        style_plot(self.item)
        self.legend = self.item.addLegend(offset=(-10, -10), labelTextSize="8pt")
        self.scene_record: RooflineScene | None = None
        self._hovered: RooflinePoint | None = None
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)

    def draw(self, scene: RooflineScene) -> None:
        self.scene_record = scene
        self.item.clear()
        self.legend.clear()
        self.item.setTitle(scene.title)
        intensities = [p.intensity for p in scene.points]
        knees = [knee_intensity(r.peak_flops, r.bw_bytes_per_s) for r in scene.roofs]
        lo = min(intensities + knees + [1.0]) / 4
        hi = max(intensities + knees + [16.0]) * 4
        for index, roof in enumerate(scene.roofs):
            x, y = roofline_curve(roof.peak_flops, roof.bw_bytes_per_s, lo, hi, 256)
            width = 2.5 if roof.measured else 1.5
            self.item.plot(x, y, pen=pen(color(index), width, dashed=not roof.measured),
                           name=roof.label)
            knee = knees[index]
            self.item.plot([knee], [roof.peak_flops], pen=None, symbol="o", symbolSize=7,
                           symbolBrush=color(index), symbolPen=None)
            text = pg.TextItem(f"knee {knee:.3g} FLOP/B", color=color(index), anchor=(0, 1.1))
            text.setPos(math.log10(knee), math.log10(roof.peak_flops))
            self.item.addItem(text)
        groups: dict[str, list[RooflinePoint]] = {}
        for point in scene.points:
            groups.setdefault(point.series, []).append(point)
        for index, (series, points) in enumerate(groups.items()):
            c = color(len(scene.roofs) + index)
            filled = points[0].measured
            self.item.plot(
                [p.intensity for p in points], [p.flops_per_s for p in points], pen=None,
                symbol=SYMBOLS[index % len(SYMBOLS)], symbolSize=9 if filled else 10,
                symbolBrush=c if filled else pg.mkBrush(255, 255, 255, 0),
                symbolPen=pg.mkPen(c, width=1.5), name=series)

    # hover ------------------------------------------------------------------------------------
    def nearest_point(self, scene_pos: QPointF) -> RooflinePoint | None:
        if self.scene_record is None or not self.scene_record.points:
            return None
        vb = self.item.getViewBox()
        best, best_d = None, float(HOVER_RADIUS_PX)
        for point in self.scene_record.points:
            if point.intensity <= 0 or point.flops_per_s <= 0:
                continue
            p = vb.mapViewToScene(QPointF(math.log10(point.intensity), math.log10(point.flops_per_s)))
            d = math.hypot(p.x() - scene_pos.x(), p.y() - scene_pos.y())
            if d <= best_d:
                best, best_d = point, d
        return best

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        point = self.nearest_point(scene_pos)
        if point is not self._hovered:
            self._hovered = point
            self.point_hovered.emit(point)
        if point is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(QCursor.pos(), point_tooltip(point), self)


def point_tooltip(point: RooflinePoint) -> str:
    kind = "measured" if point.measured else "predicted"
    lines = [
        f"<b>{point.label}</b> ({point.series})",
        f"FLOPs: {point.flops:.4g}",
        f"bytes moved: {point.bytes_moved:.4g}",
        f"I = {point.intensity:.3g} FLOP/byte",
        f"{kind}: {format_flops(point.flops_per_s)}",
    ]
    if point.detail:
        lines.append(point.detail)
    return "<br>".join(lines)


def points_array(points) -> np.ndarray:
    return np.array([[p.intensity, p.flops_per_s] for p in points], dtype=float)
