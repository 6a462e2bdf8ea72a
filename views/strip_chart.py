"""A live strip chart: a few named series against time, one PlotCurveItem each."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from inferlab.views.style import pen, style_plot


class StripChart(pg.PlotWidget):
    """Time on x as seconds before now (fixed window, newest at 0); `y_label` says the unit.

    Axes stay fixed while data scrolls, so a live update repaints curves, not axes.
    """

    def __init__(self, title: str, y_label: str, y_range: tuple[float, float] | None = None,
                 window_s: float = 60.0, parent=None):
        super().__init__(parent=parent)
        self.window_s = window_s
        item = self.getPlotItem()
        item.setTitle(title)
        item.setLabel("left", y_label)
        item.setLabel("bottom", "time before now (s)")
        item.setClipToView(True)
        item.setDownsampling(auto=True, mode="peak")
        style_plot(item)
        # Live charts repaint several times a second: no antialiasing, horizontal grid only.
        self.setAntialiasing(False)
        item.showGrid(x=False, y=True, alpha=0.2)
        item.setXRange(-window_s, 0, padding=0.01)
        if y_range is not None:
            item.setYRange(*y_range, padding=0.02)
        item.getViewBox().setMouseEnabled(x=False, y=False)
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._legend = None
        self._title = title
        self._last_t = None

    def set_series(self, t_s: np.ndarray, series: dict[str, np.ndarray], legend: bool = False) -> None:
        """Replace the data (t_s: sample times in seconds): one curve per name, reused."""
        if len(t_s) and self._last_t == (len(t_s), float(t_s[-1])):
            return  # no new sample since the last frame: nothing to redraw
        self._last_t = (len(t_s), float(t_s[-1])) if len(t_s) else None
        if legend and self._legend is None and len(series) > 1:
            self._legend = self.getPlotItem().addLegend(offset=(5, 5), colCount=4)
        for name in list(self._curves):
            if name not in series:
                self.getPlotItem().removeItem(self._curves.pop(name))
        ago = t_s - t_s[-1] if len(t_s) else t_s
        for index, (name, values) in enumerate(series.items()):
            curve = self._curves.get(name)
            if curve is None:
                # 1-pixel, non-antialiased pens: the cheap path for live data (STYLE.md).
                curve = self.getPlotItem().plot(pen=pen(index, 1), name=name, antialias=False)
                self._curves[name] = curve
            finite = np.isfinite(values)
            curve.setData(ago[finite], values[finite], skipFiniteCheck=True)

    def set_title_once(self, title: str) -> bool:
        """Change the title only when it differs (text layout is not free at 4 Hz); True if
        it changed."""
        if title == self._title:
            return False
        self._title = title
        self.getPlotItem().setTitle(title)
        return True

    def set_y_range(self, low: float, high: float) -> None:
        self.getPlotItem().setYRange(low, high, padding=0.02)
