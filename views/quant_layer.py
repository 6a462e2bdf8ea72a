"""The quantization lab's layer tab: one linear's weights with the quantization grid drawn
over them, the error distribution beside it, the scales as a strip, the numbers in a table."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QGridLayout, QLabel, QWidget

from inferlab.engines.roofline.units import format_bytes
from inferlab.views.fact_table import FactTable
from inferlab.views.style import pen, style_plot

HIST_COLOR = "#0072B2"
GRID_COLOR = "#D55E00"
ERROR_COLOR = "#009E73"


def _step_plot(plot: pg.PlotItem, edges, counts, colour: str, name: str):
    return plot.plot(np.asarray(edges), np.asarray(counts, dtype=float), stepMode="center",
                     fillLevel=0, brush=pg.mkBrush(colour + "80"), pen=pen(colour), name=name)


class LayerPanel(QWidget):
    """`draw(analysis)`: a `LayerAnalysis` or None (nothing to show, with a reason)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.hist = pg.PlotWidget()
        hp = self.hist.getPlotItem()
        hp.setLabel("bottom", "weight value")
        hp.setLabel("left", "weights per bin")
        style_plot(hp)
        self.hist_legend = hp.addLegend(offset=(-5, 5))
        self.error = pg.PlotWidget()
        ep = self.error.getPlotItem()
        ep.setLabel("bottom", "error: dequantized − original weight")
        ep.setLabel("left", "weights per bin")
        style_plot(ep)
        self.scales = pg.PlotWidget()
        sp = self.scales.getPlotItem()
        sp.setLabel("bottom", "group along the input")
        sp.setLabel("left", "output row")
        sp.invertY(True)
        style_plot(sp)
        self.scale_image = pg.ImageItem(axisOrder="row-major")
        sp.addItem(self.scale_image)
        self.colorbar = pg.ColorBarItem(colorMap=pg.colormap.get("viridis"), interactive=False,
                                        label="step (weight units)")
        self.colorbar.setImageItem(self.scale_image, insert_in=sp)
        self.facts = FactTable(("Quantity", "Value"))
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        grid = QGridLayout(self)
        grid.addWidget(self.caption, 0, 0, 1, 2)
        grid.addWidget(self.hist, 1, 0, 1, 2)
        grid.addWidget(self.error, 2, 0)
        grid.addWidget(self.scales, 2, 1)
        grid.addWidget(self.facts, 3, 0, 1, 2)
        grid.setRowStretch(1, 5)
        grid.setRowStretch(2, 4)
        grid.setRowStretch(3, 3)

    def draw(self, a, note: str = "") -> None:
        hp, ep, sp = (w.getPlotItem() for w in (self.hist, self.error, self.scales))
        for plot in (hp, ep):  # the PlotItem's own removeItem: it forgets the item too
            for item in list(plot.listDataItems()):
                plot.removeItem(item)
        for item in [i for i in hp.items if isinstance(i, pg.InfiniteLine)]:
            hp.removeItem(item)
        self.hist_legend.clear()
        if a is None:
            self.caption.setText(note or "No layer drawn yet.")
            self.scale_image.clear()
            self.facts.set_rows([])
            return
        self.caption.setText(
            f"<b>{a.linear}</b> [{a.shape[0]} × {a.shape[1]}] under <b>{a.scheme}</b>. "
            + (f"Grid: {len(a.levels)} levels of {a.unit}." if a.levels
               else "This scheme has no grid to draw (no rounding to levels).")
            + (f" {note}" if note else ""))
        _step_plot(hp, a.hist_edges, a.hist_counts, HIST_COLOR, "weights")
        if a.levels:
            top = max(a.hist_counts) * 1.05 if a.hist_counts else 1.0
            lo, hi = a.hist_edges[0], a.hist_edges[-1]
            shown = [v for v in a.levels if lo <= v <= hi]
            xs = np.repeat(np.asarray(shown), 2)
            ys = np.tile([0.0, top], len(shown))
            hp.plot(xs, ys, connect="pairs", pen=pg.mkPen(GRID_COLOR + "A0", width=1),
                    name=f"grid levels ({len(a.levels)})")
            lo_clip, hi_clip = a.clip_range
            for x in (lo_clip, hi_clip):
                hp.addItem(pg.InfiniteLine(x, angle=90, pen=pen(GRID_COLOR, 2, dashed=True)))
            hp.plot([lo_clip], [0], pen=None, symbol="t", symbolBrush=GRID_COLOR,
                    name=f"clipping range [{lo_clip:.3g}, {hi_clip:.3g}]")
        _step_plot(ep, a.error_edges, a.error_counts, ERROR_COLOR, "error")
        self._draw_scales(sp, a)
        e = a.error
        self.facts.set_rows([
            ("SQNR", f"{e.sqnr_db:.2f} dB" if math.isfinite(e.sqnr_db)
             else "∞: every weight lies on the grid (reproduced exactly)"),
            ("MSE", f"{e.mse:.3e}"),
            ("Max |error|", f"{e.max_abs_error:.3e}"),
            ("Stored", f"{format_bytes(a.nbytes)} (fp32: {format_bytes(a.source_bytes)}, "
                       f"{a.source_bytes / a.nbytes:.2f}× smaller)"),
            ("Bits per weight", f"{8 * a.nbytes / (a.shape[0] * a.shape[1]):.3f}"),
            ("Scales", a.scale_label or "none"),
        ])

    def _draw_scales(self, sp: pg.PlotItem, a) -> None:
        if not a.scales:
            self.scale_image.clear()
            sp.setTitle("no scales")
            return
        img = np.asarray(a.scales, dtype=float)
        self.scale_image.setImage(img, autoLevels=False)
        lo, hi = float(img.min()), float(img.max())
        self.colorbar.setLevels((lo, hi if hi > lo else lo + 1e-12))
        # Rows of the strip are every k-th weight row: stretch it back to weight rows.
        rows = a.scale_rows
        step = rows[1] - rows[0] if len(rows) > 1 else 1
        self.scale_image.setRect(0, 0, img.shape[1], len(rows) * step)
        sp.setTitle(a.scale_label)
        sp.setLabel("left", "output row" + (f" (every {step}th drawn)" if step > 1 else ""))
        sp.setLabel("bottom", "group along the input" if img.shape[1] > 1 else "one per row")
        sp.autoRange()

