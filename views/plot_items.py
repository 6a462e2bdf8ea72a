"""pyqtgraph items that paint what pyqtgraph's own items paint (give or take a pixel at an
edge), in a fraction of the time on Qt's software raster (offscreen, and most desktops'
widgets), which blends a translucent or cosmetic outline pixel by pixel. The batching and
endpoint timelines draw with them.

- `GridAxis`: grid lines opaque, in the colour their translucent pen showed over white, under
  the data; tick values shared by x-linked axes; a grid-only axis drawn without a QPicture.
- `SolidBars`: bars with a 1 px outline of their colour, painted as fills grown by half a pixel.
- `without_flat_interior`: a step curve's points less those inside flat runs (same pixels).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QColor, QPen, QPicture

GRID_Z = -200
"""A GridAxis's z while it draws a grid: under its plot's view box (at -100), so the grid lines
go under the data."""
AXIS_Z = 0.5
"""Its z without a grid: pyqtgraph's, over the data (the ticks point into the plot)."""


def over_white(color: QColor) -> QColor:
    """The opaque colour `color` shows over the white background."""
    a = color.alphaF()
    return QColor(*(round(a * c + (1.0 - a) * 255) for c in (color.red(), color.green(),
                                                               color.blue())))


class GridAxis(pg.AxisItem):
    """An axis whose grid lines are opaque, in the colour their translucent pen showed over
    the white background, and drawn under the data (at GRID_Z while it has a grid): Qt's software
    raster blends a translucent 1 px line pixel by pixel, ~10x an opaque one, and the grids
    were a quarter of a live repaint. Over white it looks the same; over a bar the faint
    line that showed through is gone.

    The tick values are computed once for all the axes of one range and length (the six
    x-linked axes of a frame), not once per axis per x move; an axis that shows no values
    draws only its grid and its line, from pyqtgraph's own arithmetic (`_grid_lines`) with
    no pyqtgraph Points and no QPicture."""

    _tick_memo: dict[tuple, list[tuple[float, list[float]]]] = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lines = None  # a grid-only axis's line and tick lines, as last drawn (paint)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph API
        key = (minVal, maxVal, size, self.scale, self._tickDensity, repr(self._tickSpacing),
               self.style["maxTickLevel"], self.logMode, type(self))
        levels = GridAxis._tick_memo.get(key)
        if levels is None:
            levels = super().tickValues(minVal, maxVal, size)
            if len(GridAxis._tick_memo) > 16:
                GridAxis._tick_memo.clear()
            GridAxis._tick_memo[key] = levels
        return [(spacing, list(values)) for spacing, values in levels]

    def setGrid(self, grid):  # noqa: N802 - pyqtgraph API
        super().setGrid(grid)
        self.setZValue(AXIS_Z if self.grid is False else GRID_Z)

    def _grid_only(self) -> bool:
        """A bottom axis with a grid over a linked view, no values and pyqtgraph's default
        tick settings."""
        return (self.grid is not False and self.linkedView() is not None
                and not self.style["showValues"]
                and self._tickLevels is None and not self.logMode
                and self.style["tickAlpha"] is None and self.orientation == "bottom"
                and not any(self.style["stopAxisAtTick"]))

    def paint(self, p, opt, widget):
        """A grid-only axis draws its line and one drawLines per tick level straight away,
        kept until pyqtgraph asks for a new picture (no QPicture recorded and replayed)."""
        if not self._grid_only():
            return super().paint(p, opt, widget)
        if self.picture is None:  # pyqtgraph's mark that the axis must be drawn again
            self._lines = self._grid_lines()
            self.picture = QPicture()
        if self._lines is None:
            return
        (pen, p1, p2), levels = self._lines
        p.save()
        p.setRenderHint(p.RenderHint.Antialiasing, False)
        p.setPen(pen)
        p.drawLine(p1, p2)
        for pen, lines in levels:
            p.setPen(pen)
            p.drawLines(lines)
        p.restore()

    def generateDrawSpecs(self, p):  # noqa: N802 - pyqtgraph API
        if self.grid is False:
            return super().generateDrawSpecs(p)
        if self._grid_only():
            drawn = self._grid_lines()
            if drawn is None:
                return None
            axis_spec, levels = drawn
            return axis_spec, [(pen, line.p1(), line.p2()) for pen, lines in levels
                               for line in lines], []
        specs = super().generateDrawSpecs(p)
        if specs is None:
            return specs
        axis_spec, tick_specs, text_specs = specs
        opaque: dict[int, QPen] = {}  # one pen per tick level
        ticks = []
        for pen, p1, p2 in tick_specs:
            solid = opaque.get(id(pen))
            if solid is None:
                solid = opaque[id(pen)] = QPen(pen)
                solid.setColor(over_white(pen.color()))
            ticks.append((solid, p1, p2))
        return axis_spec, ticks, text_specs

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):  # noqa: N802, N803
        """pyqtgraph's drawPicture, the grid lines drawn with one drawLines per tick level
        (its pen) in the same order instead of a setPen and drawLine per line."""
        if self.grid is False:
            return super().drawPicture(p, axisSpec, tickSpecs, textSpecs)
        p.setRenderHint(p.RenderHint.Antialiasing, False)
        p.setRenderHint(p.RenderHint.TextAntialiasing, True)
        pen, p1, p2 = axisSpec
        p.setPen(pen)
        p.drawLine(p1, p2)
        levels: dict[int, tuple[QPen, list[QLineF]]] = {}
        for pen, p1, p2 in tickSpecs:
            levels.setdefault(id(pen), (pen, []))[1].append(QLineF(p1, p2))
        for pen, lines in levels.values():
            p.setPen(pen)
            p.drawLines(lines)
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        p.setPen(self.textPen())
        p.setClipRect(self.boundingRect().toAlignedRect())
        for rect, flags, text in textSpecs:
            p.drawText(rect, int(flags), text)

    def _grid_lines(self):
        """What AxisItem.generateDrawSpecs gives a grid-only bottom axis (the same
        arithmetic), as the axis line's spec and each tick level's opaque pen and lines; None
        where pyqtgraph draws nothing."""
        bounds = self.mapRectFromParent(self.geometry())
        view = self.linkedView()
        tick_start = view.mapRectToItem(self, view.boundingRect()).top()
        tick_stop = bounds.top()
        span = (bounds.topLeft() + pg.Point(-1.0, 1.0), bounds.topRight() + pg.Point(1.0, 1.0))
        points = [self.mapToDevice(x) for x in span]
        if None in points:
            return None
        length_px = pg.Point(points[1] - points[0]).length()
        if length_px == 0:
            return None
        levels = []
        for alpha, xs in self._tick_levels(bounds.width(), length_px):
            pen = QPen(self.tickPen())
            if pen.brush().style() == Qt.BrushStyle.SolidPattern:
                color = QColor(pen.color())
                color.setAlpha(alpha)
                pen.setColor(over_white(color))
            levels.append((pen, [QLineF(x, tick_start, x, tick_stop) for x in xs]))
        return (self.pen(), span[0], span[1]), levels

    def _tick_levels(self, width: float, length_px: float) -> list[tuple[int, list[float]]]:
        """Each tick level's line alpha and x positions (in the axis's coordinates)."""
        lo, hi = self.range
        dif = hi - lo
        scale = 1.0 if dif == 0 else width / dif
        offset = 0.0 if dif == 0 else lo * scale
        x_min, x_max = sorted(v * scale - offset for v in self.range)
        levels = []
        for i, (_spacing, values) in enumerate(self.tickValues(lo, hi, length_px)):
            alpha = 255 / (i + 1)  # pyqtgraph's formula, in its order of operations
            alpha *= self.grid / 255.0 * min(max(0.05 * length_px / (len(values) + 1), 0.0), 1.0)
            xs = [x for x in (v * scale - offset for v in values) if x_min <= x <= x_max]
            levels.append((int(alpha), xs))
        return levels


class SolidBars(pg.BarGraphItem):
    """Bars of one colour, each with a 1 px outline of that colour (visible at any zoom),
    painted as one fill of each rectangle grown by half a pixel on every side, no outline:
    the same pixels, ~20x faster (Qt's raster strokes a cosmetic outline pixel by pixel, and
    a long bar less than a pixel tall is all outline). Data, bounds and legend swatch are the
    BarGraphItem's own."""

    def __init__(self, color: str):
        super().__init__(x0=[], x1=[], y0=[], height=[], brush=color,
                         pen=pg.mkPen(color, width=1))
        self._grown = pg.Qt.internals.PrimitiveArray(QRectF, 4)

    def paint(self, p, *args):
        t = p.transform()
        if t.isRotating():  # rotated or sheared: not this item's views
            return super().paint(p, *args)
        if t.m11() == 0 or t.m22() == 0:  # a view of no width or height: nothing shows
            return
        x0, x1 = np.asarray(self.opts["x0"], np.float64), np.asarray(self.opts["x1"], np.float64)
        if x0.size == 0:
            return
        half_x, half_y = 0.5 / abs(t.m11()), 0.5 / abs(t.m22())  # half a pixel, in data units
        self._grown.resize(x0.size)
        rects = self._grown.ndarray()
        rects[:, 0] = x0 - half_x
        rects[:, 1] = np.asarray(self.opts["y0"], np.float64) - half_y
        rects[:, 2] = x1 - x0 + 2 * half_x
        rects[:, 3] = np.asarray(self.opts["height"], np.float64) + 2 * half_y
        p.setPen(Qt.NoPen)
        p.setBrush(pg.mkBrush(self.opts["brush"]))
        p.drawRects(*self._grown.drawargs())


def without_flat_interior(x: np.ndarray, y: np.ndarray, connect: np.ndarray):
    """x, y and connect of the same polyline less the points inside a connected horizontal
    run (a value held over several iterations: its middle points draw nothing new). The
    curve paints the same pixels from fewer points; an idle strip keeps two."""
    flat = np.zeros(y.shape[0] + 1, bool)  # flat[i + 1]: point i joins i + 1 on one level
    flat[1:-1] = (y[1:] == y[:-1]) & connect[:-1]
    keep = ~(flat[:-1] & flat[1:])
    return x[keep], y[keep], connect[keep]
