"""The MoE lab's routing plots: the layer × expert heat map of tokens per expert (ONE
ImageItem, uint8 codes into a 256-colour lookup table, a colour bar in tokens), the top-k
router weights, and the load imbalance max / mean per MoE layer beside the ideal 1.0.

Each plot draws numbers it is handed (`MoEStepRecord` fields, or their sums over a run); none
starts work.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QVBoxLayout, QWidget

from inferlab.engines.cluster.expert_load import imbalance as load_imbalance
from inferlab.engines.labs.moe.records import HIST_BINS
from inferlab.views.style import fixed_plot, pen, style_plot

HEAT_STOPS = ((0.0, "#F7FBFF"), (0.35, "#9ECAE1"), (0.7, "#2171B5"), (1.0, "#08306B"))
"""0 tokens nearly white (an idle expert), the most loaded expert dark blue."""
HEAT_MAP = pg.ColorMap([p for p, _ in HEAT_STOPS], [c for _, c in HEAT_STOPS])
HEAT_LUT = HEAT_MAP.getLookupTable(0.0, 1.0, 256, alpha=False)
"""uint8 [256, 3]: the heat map's colours, code 0 (no token) to 255 (the top count)."""
MAX_CELL_TEXTS = 160
"""Up to this many cells the heat map writes each count in its cell."""
BAR = "#0072B2"
RANK = "#D55E00"
IDEAL = "#555555"


def heat_codes(counts, top: float) -> np.ndarray:
    """uint8 [layers, experts]: each count's index into HEAT_LUT, 0 tokens → 0 and `top`
    tokens (the colour bar's top) → 255, linearly."""
    c = np.asarray(counts, dtype=np.float64)
    return np.round(c * (255.0 / max(float(top), 1.0))).clip(0, 255).astype(np.uint8)


def imbalance(counts) -> np.ndarray:
    """max / mean of each row of `counts` [layers, experts] (expert_load.imbalance: 1.0 for a
    row with no token)."""
    return np.array([load_imbalance(row) for row in np.asarray(counts, dtype=np.float64)])


def index_ticks(labels: list[str], most: int = 24) -> list[tuple[float, str]]:
    """Ticks at cell centres (i + 0.5), at most about `most` of them labelled evenly."""
    step = max(1, -(-len(labels) // most))
    return [(i + 0.5, text) for i, text in enumerate(labels) if i % step == 0]


class ExpertHeatMap(QWidget):
    """Tokens per expert: rows the MoE layers (model layer index on the axis), columns the
    experts; one ImageItem, its colour bar in tokens."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.canvas = pg.GraphicsLayoutWidget()  # (its own clear() would empty the layout)
        self.canvas.setBackground("w")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas)
        self.setMinimumSize(300, 150)
        self.plot = self.canvas.addPlot()
        p = self.plot
        style_plot(p)
        p.showGrid(x=False, y=False)
        p.invertY(True)
        p.setMouseEnabled(x=False, y=False)
        p.hideButtons()
        p.setLabel("bottom", "expert")
        p.setLabel("left", "MoE layer")
        p.setTitle("Tokens per expert", size="10pt")
        self.image = pg.ImageItem(axisOrder="row-major")
        p.addItem(self.image)
        self.bar = pg.ColorBarItem(values=(0, 1), colorMap=HEAT_MAP, interactive=False,
                                   width=12, label="tokens")
        self.canvas.addItem(self.bar, row=0, col=1)  # beside the plot, its height
        self.texts: list[pg.TextItem] = []
        self.codes = np.zeros((0, 0), np.uint8)
        self.top = 0

    def clear_data(self) -> None:
        self.image.clear()
        self.codes = np.zeros((0, 0), np.uint8)
        self._write(np.zeros((0, 0)))

    def draw(self, counts, layers: list[int], title: str) -> None:
        """`counts[i][e]`: tokens of MoE layer `layers[i]` routed to expert e."""
        c = np.asarray(counts, dtype=np.int64).reshape(len(layers), -1)
        n_layers, n_experts = c.shape
        self.top = int(c.max(initial=0))
        self.codes = heat_codes(c, self.top)
        self.image.setImage(self.codes, levels=(0, 255), lut=HEAT_LUT, autoLevels=False)
        self.image.setRect(QRectF(0, 0, n_experts, n_layers))
        self.bar.setLevels((0, max(self.top, 1)))
        p = self.plot
        p.getAxis("bottom").setTicks([index_ticks([str(e) for e in range(n_experts)], 32), []])
        p.getAxis("left").setTicks([index_ticks([str(i) for i in layers]), []])
        p.setXRange(0, max(n_experts, 1), padding=0)
        p.setYRange(0, max(n_layers, 1), padding=0)
        p.setTitle(title, size="10pt")
        self._write(c if c.size <= MAX_CELL_TEXTS else np.zeros((0, 0)))

    def _write(self, counts: np.ndarray) -> None:
        """Each cell's count as text (dark cells in white), from a pool of TextItems."""
        cells = [(i, e) for i in range(counts.shape[0]) for e in range(counts.shape[1])]
        while len(self.texts) < len(cells):
            text = pg.TextItem(anchor=(0.5, 0.5))
            self.plot.addItem(text)
            self.texts.append(text)
        for text, (i, e) in zip(self.texts, cells, strict=False):
            value = int(counts[i, e])
            dark = self.top > 0 and value > 0.55 * self.top
            text.setText(str(value), color="#FFFFFF" if dark else "#222222")
            text.setPos(e + 0.5, i + 0.5)
            text.setVisible(True)
        for text in self.texts[len(cells):]:
            text.setVisible(False)


class TopKWeights(pg.PlotWidget):
    """The router weights of the chosen experts, every MoE layer's, in HIST_BINS bins over
    [0, 1]; dashed lines at each rank's mean weight (rank 1 the largest)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        p = fixed_plot(self, "Top-k router weights", "choices (token, expert)", "router weight")
        p.setXRange(0, 1, padding=0.02)
        self.legend = p.addLegend(offset=(-5, 5), labelTextSize="8pt")  # clear of the ranks
        width = 1.0 / HIST_BINS
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.9 * width, brush=BAR,
                                    pen=pg.mkPen(None))
        p.addItem(self.bars)
        self.legend.addItem(self.bars, "all MoE layers")
        self.rank_key = p.plot([], [], pen=pen(RANK, 2, dashed=True), name="mean of rank r")
        self.ranks: list[pg.InfiniteLine] = []
        self.heights = np.zeros(0)

    def draw(self, hist, rank_means) -> None:
        """`hist`: HIST_BINS counts over [0, 1]; `rank_means[r]`: mean weight of rank r."""
        self.heights = np.asarray(hist, dtype=np.float64)
        centres = (np.arange(len(self.heights)) + 0.5) / max(len(self.heights), 1)
        self.bars.setOpts(x=centres, height=self.heights)
        p = self.getPlotItem()
        while len(self.ranks) < len(rank_means):
            line = pg.InfiniteLine(angle=90, pen=pen(RANK, 2, dashed=True),
                                   label="", labelOpts={"position": 0.58, "color": RANK,
                                                         "fill": (255, 255, 255, 210)})
            p.addItem(line)
            self.ranks.append(line)
        for r, (line, mean) in enumerate(zip(self.ranks, rank_means, strict=False)):
            line.setValue(float(mean))
            line.label.setFormat(f"r{r + 1}" if len(rank_means) <= 4 else "")
            line.setVisible(True)
        for line in self.ranks[len(rank_means):]:
            line.setVisible(False)
        p.setYRange(0, max(float(self.heights.max(initial=0)), 1.0) * 2.2, padding=0)

    def clear_data(self) -> None:
        self.draw(np.zeros(HIST_BINS), [])


class ImbalancePlot(pg.PlotWidget):
    """Load imbalance max / mean of tokens per expert, one bar per MoE layer, beside the
    ideal 1.0 (every expert equally loaded): the hottest expert sets the layer's time."""

    def __init__(self, parent=None):
        super().__init__(parent)
        p = fixed_plot(self, "Load imbalance", "max / mean tokens per expert", "MoE layer")
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.6, brush="#E69F00",
                                    pen=pg.mkPen(None))
        p.addItem(self.bars)
        self.ideal = pg.InfiniteLine(1.0, angle=0, pen=pen(IDEAL, 2, dashed=True),
                                     label="ideal 1.0 (even load)",
                                     labelOpts={"position": 0.98, "anchors": [(1, 1), (1, 1)],
                                                "color": IDEAL, "fill": (255, 255, 255, 210)})
        p.addItem(self.ideal)
        self.heights = np.zeros(0)

    def draw(self, values, layers: list[int]) -> None:
        self.heights = np.asarray(values, dtype=np.float64)
        n = len(self.heights)
        self.bars.setOpts(x=np.arange(n) + 0.5, height=self.heights)
        p = self.getPlotItem()
        p.getAxis("bottom").setTicks([index_ticks([str(i) for i in layers]), []])
        p.setXRange(0, max(n, 1), padding=0.02)
        p.setYRange(0, max(float(self.heights.max(initial=0)), 1.0) * 1.3, padding=0)

    def clear_data(self) -> None:
        self.draw([], [])
