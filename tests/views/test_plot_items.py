"""views/plot_items.py's items and helpers paint what pyqtgraph's own do: pixels compared
offscreen (the grid axes are compared in the whole timeline, test_batch_timeline.py)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest

from inferlab.views.batch_timeline import BAR_HEIGHT, step_x
from inferlab.views.plot_items import SolidBars, without_flat_interior


def _painted(item, sx: float, sy: float) -> np.ndarray:
    """Which pixels of a 400x300 white image `item` paints at scale (sx, sy)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter

    img = QImage(400, 300, QImage.Format_RGB32)
    img.fill(Qt.white)
    p = QPainter(img)
    p.translate(5.3, 7.7)
    p.scale(sx, sy)
    item.paint(p, None, None)
    p.end()
    pixels = np.frombuffer(img.constBits(), np.uint32).reshape(300, img.bytesPerLine() // 4)
    return pixels[:, :400] != pixels[0, -1]


def _grown_by_a_pixel(mask: np.ndarray) -> np.ndarray:
    out = mask.copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            out |= np.roll(np.roll(mask, dy, 0), dx, 1)
    return out


@pytest.mark.parametrize("sx, sy", [(3.7, 6.9), (3.7, 0.23), (0.9, 0.05), (11.1, 0.5)])
def test_solid_bars_paint_the_pixels_of_filled_bars_with_a_1px_outline(qtbot, sx, sy):
    """Rows many pixels tall or a fraction of one: SolidBars paints what a BarGraphItem with
    a 1 px outline of the bar colour paints, give or take a pixel at an edge (rounding)."""
    rng = np.random.default_rng(0)
    x0 = rng.uniform(0, 90, 300)
    x1 = x0 + rng.exponential(5, 300)
    y0 = rng.integers(0, 40, 300) - BAR_HEIGHT / 2
    height = np.full(300, BAR_HEIGHT)
    solid = SolidBars("#0072B2")
    solid.setOpts(x0=x0, x1=x1, y0=y0, height=height)
    outlined = pg.BarGraphItem(x0=x0, x1=x1, y0=y0, height=height, brush="#0072B2",
                               pen=pg.mkPen("#0072B2", width=1))
    want, got = _painted(outlined, sx, sy), _painted(solid, sx, sy)
    assert want.sum() > 200
    assert not (got & ~_grown_by_a_pixel(want)).any()
    assert not (want & ~_grown_by_a_pixel(got)).any()
    assert (got != want).sum() <= 0.06 * want.sum()


def _curve_pixels(x, y, connect, width: float) -> np.ndarray:
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter

    curve = pg.PlotCurveItem(pen=pg.mkPen("#0072B2", width=width), antialias=False)
    curve.setData(x, y, connect=connect, skipFiniteCheck=True)
    img = QImage(600, 200, QImage.Format_RGB32)
    img.fill(Qt.white)
    p = QPainter(img)
    p.translate(3.3, 190.7)
    p.scale(590 / x[-1], -30.0)
    curve.paint(p, None, None)
    p.end()
    return np.frombuffer(img.constBits(), np.uint32).reshape(200, -1)[:, :600].copy()


@pytest.mark.parametrize("seed", range(4))
def test_a_step_curve_without_its_flat_interior_paints_the_same_pixels(qtbot, seed):
    """Values held over runs of iterations, idle gaps between some: dropping the points
    inside each connected flat run leaves fewer points and the very same pixels (1 px and
    1.5 px pens, as the strips draw)."""
    rng = np.random.default_rng(seed)
    n = 3000
    duration = rng.uniform(0.005, 0.02, n)
    start = np.cumsum(duration + np.where(rng.random(n) < 0.01, 1.0, 0.001)) - duration
    values = np.repeat(rng.integers(0, 5, n // 10), 10) * (rng.random(n) < 0.9)
    x, connect = step_x(start, start + duration)
    y = np.repeat(values.astype(np.float64), 2)
    fx, fy, f_connect = without_flat_interior(x, y, connect)
    assert len(fx) < len(x) / 2
    assert (fx[0], fx[-1]) == (x[0], x[-1])
    for width in (1.0, 1.5):
        want = _curve_pixels(x, y, connect, width)
        assert (want != want[0, 0]).sum() > 10_000
        np.testing.assert_array_equal(_curve_pixels(fx, fy, f_connect, width), want)


def test_solid_bars_in_a_view_of_no_height_paint_nothing(qtbot):
    """A collapsed view (scale 0) paints no bar and raises nothing (an exception inside a
    Qt paint call takes the process down)."""
    solid = SolidBars("#0072B2")
    solid.setOpts(x0=np.array([1.0]), x1=np.array([9.0]), y0=np.array([0.0]),
                  height=np.array([BAR_HEIGHT]))
    assert _painted(solid, 3.7, 1.0).any()
    assert not _painted(solid, 3.7, 0.0).any()
