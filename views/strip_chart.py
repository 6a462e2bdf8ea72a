"""A live strip chart: a few named series against time, one PlotCurveItem each."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from views.style import pen, style_plot


class StripChart(pg.PlotWidget):
    """Time on x (seconds, newest at the right); `y_label` says the unit."""

    def __init__(self, title: str, y_label: str, y_range: tuple[float, float] | None = None,
                 window_s: float = 60.0, parent=None):
        super().__init__(parent=parent)
        self.window_s = window_s
        item = self.getPlotItem()
        item.setTitle(title)
        item.setLabel("left", y_label)
        item.setLabel("bottom", "time (s)")
        item.setClipToView(True)
        item.setDownsampling(auto=True, mode="peak")
        style_plot(item)
        if y_range is not None:
            item.setYRange(*y_range, padding=0.02)
            item.getViewBox().setMouseEnabled(x=True, y=False)
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._legend = None

    def set_series(self, t_s: np.ndarray, series: dict[str, np.ndarray], legend: bool = False) -> None:
        """Replace the data: one curve per name (curves are reused between updates)."""
        if legend and self._legend is None and len(series) > 1:
            self._legend = self.getPlotItem().addLegend(offset=(5, 5), colCount=4)
        for name in list(self._curves):
            if name not in series:
                self.getPlotItem().removeItem(self._curves.pop(name))
        for index, (name, values) in enumerate(series.items()):
            curve = self._curves.get(name)
            if curve is None:
                curve = self.getPlotItem().plot(pen=pen(index, 1.5), name=name)
                self._curves[name] = curve
            finite = np.isfinite(values)
            curve.setData(t_s[finite], values[finite], skipFiniteCheck=True)
        if len(t_s):
            end = float(t_s[-1])
            self.getPlotItem().setXRange(max(0.0, end - self.window_s), max(end, 1.0), padding=0)
