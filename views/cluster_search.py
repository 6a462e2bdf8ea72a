"""The layout search as a heat map: rows the tensor degree t, columns the replicas (or the P:D
split), each cell's colour its goodput per GPU (every cell one full simulated run of the same
requests), its number written in it, the best cell outlined. Cells no layout fits (more GPUs
than the budget) are grey. It draws the search summary (`inferlab run cluster --search`'s
dict); it starts no work."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from inferlab.views.style import style_plot

EMPTY = np.nan
CAPTION = ("Every layout of the kind within the cluster's GPUs, each one full simulated run "
           "of the same requests at the workload's arrival rate, scored by goodput per GPU "
           "(requests/s within both SLOs, per GPU; 0 below the attainment goal): the layout "
           "that serves this load within the SLOs on the fewest GPUs scores highest. Grey: no "
           "such layout fits the budget or the GPUs' memory.")
EP_COLUMNS = (" Columns: the EP group's replicas; within each, 0, 1 and 2 EPLB slots per GPU, "
              "each without and with dual-batch overlap.")
UNFIT_GREY = (200, 200, 200, 255)
DENSE_COLUMNS = 10
"""Past this many columns a cell is too narrow for its text: the colours, the best cell's
outline and the title speak, and only some columns are named."""


def search_grid(summary: dict) -> np.ndarray:
    """goodput_per_gpu[row][column] (nan where no layout was run)."""
    grid = np.full((len(summary["tp_rows"]), len(summary["columns"])), EMPTY)
    for cell in summary["cells"]:
        grid[cell["row"], cell["column"]] = cell["goodput_per_gpu"]
    return grid


class ClusterSearchView(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.caption = QLabel(CAPTION)
        self.caption.setWordWrap(True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.caption)
        layout.addWidget(self.canvas, 1)
        self.plot = self.canvas.addPlot()
        style_plot(self.plot)
        self.plot.showGrid(x=False, y=False)
        self.plot.invertY(True)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setLabel("left", "tensor-parallel degree t")
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(pg.colormap.get("viridis"))
        self.plot.addItem(self.image)
        self.unfit = pg.ImageItem(axisOrder="row-major")  # grey over cells no layout fits
        self.plot.addItem(self.unfit)
        self.bar = pg.ColorBarItem(colorMap=pg.colormap.get("viridis"), interactive=False,
                                   label="goodput per GPU (requests/s)")
        self.bar.setImageItem(self.image, insert_in=self.plot)
        self.best = pg.QtWidgets.QGraphicsRectItem()
        self.best.setPen(pg.mkPen("#D55E00", width=4))
        self.best.setVisible(False)
        self.plot.addItem(self.best)
        self.texts: list = []
        self.summary: dict | None = None

    def show_summary(self, summary: dict | None) -> None:
        for text in self.texts:
            self.plot.removeItem(text)
        self.texts = []
        self.summary = summary
        if not summary or not summary.get("cells"):
            self.image.clear()
            self.unfit.clear()
            self.best.setVisible(False)
            return
        grid = search_grid(summary)
        shown = np.where(np.isnan(grid), 0.0, grid)
        high = float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0
        self.image.setImage(shown, levels=(0, max(high, 1e-9)))
        self.image.setRect(QRectF(0, 0, grid.shape[1], grid.shape[0]))
        self.unfit.setImage(unfit_rgba(grid), levels=(0, 255))
        self.unfit.setRect(QRectF(0, 0, grid.shape[1], grid.shape[0]))
        self.bar.setLevels((0, max(high, 1e-9)))
        dense = grid.shape[1] > DENSE_COLUMNS
        for cell in () if dense else summary["cells"]:
            value = cell["goodput_per_gpu"]
            label = f"{cell['label']}\n{value:.3g} req/s/GPU" if value else (
                f"{cell['label']}\nmisses the SLOs")
            text = pg.TextItem(label, color="#FFFFFF" if value < 0.6 * high else "#000000",
                               anchor=(0.5, 0.5))
            text.setPos(cell["column"] + 0.5, cell["row"] + 0.5)
            self.plot.addItem(text)
            self.texts.append(text)
        for row, col in () if dense else zip(*np.nonzero(np.isnan(grid)), strict=True):
            text = pg.TextItem("over budget" if summary["kind"] != "ep" else "—",
                               color="#BBBBBB", anchor=(0.5, 0.5))
            text.setPos(col + 0.5, row + 0.5)
            self.plot.addItem(text)
            self.texts.append(text)
        best = next((c for c in summary["cells"] if c["label"] == summary.get("best")), None)
        if best is not None:
            self.best.setRect(QRectF(best["column"], best["row"], 1, 1))
        self.best.setVisible(best is not None)
        rows = summary.get("row_labels") or [str(t) for t in summary["tp_rows"]]
        self.plot.getAxis("left").setTicks([[(i + 0.5, r) for i, r in enumerate(rows)], []])
        self.plot.getAxis("bottom").setTicks(column_ticks(summary["columns"]))
        self.plot.setXRange(0, grid.shape[1], padding=0)
        self.plot.setYRange(0, grid.shape[0], padding=0)
        self.caption.setText(CAPTION + (EP_COLUMNS if summary["kind"] == "ep" else ""))
        self.plot.setTitle(f"{summary['kind']} layouts on {summary['budget_gpus']} GPUs — best: "
                           f"{summary.get('best') or 'none meets the SLOs'}")


def column_ticks(columns: list[str]) -> list[list[tuple[float, str]]]:
    """[named ticks, unnamed ticks] of the heat map's columns. Up to DENSE_COLUMNS every
    column is named; past it, where the labels come in groups (the ep search: "2 × group"
    then its EPLB and dual-batch-overlap variants, "2 × group, +1 EPLB, DBO"), the first of
    each group, else about eight evenly; the others get a bare tick."""
    every = [(j + 0.5, c) for j, c in enumerate(columns)]
    if len(columns) <= DENSE_COLUMNS:
        return [every, []]
    firsts = [(x, c) for x, c in every if "," not in c]
    named = firsts if 1 < len(firsts) < len(columns) else every[::-(-len(columns) // 8)]
    return [named, [(x, "") for x, _ in every]]


def unfit_rgba(grid: np.ndarray) -> np.ndarray:
    """uint8 [rows, columns, 4]: UNFIT_GREY where no layout was run (nan), clear elsewhere."""
    out = np.zeros((*grid.shape, 4), dtype=np.uint8)
    out[np.isnan(grid)] = UNFIT_GREY
    return out
