"""The quantization lab's model tab: every scheme run so far as perplexity against weight
memory (the Pareto frontier drawn), decode tokens/s per scheme, SQNR per linear for one
scheme, and the table of figures with each scheme's sample generation."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QGridLayout, QHBoxLayout, QLabel, QWidget

from inferlab.engines.labs.quant.evaluation import describe
from inferlab.views.fact_table import FactTable
from inferlab.views.style import color, pen, style_plot

LINEAR_KINDS = ("qkv", "o", "gate_up", "down")
MB = 1e6


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (less memory AND lower
    perplexity), in increasing memory."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front, best = [], float("inf")
    for i in order:
        if points[i][1] < best:
            front.append(i)
            best = points[i][1]
    return front


class _NameAxis(pg.AxisItem):
    """A left axis that labels integer ticks with scheme names."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.names: list[str] = []

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph API
        return [(1, list(range(len(self.names))))]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        return [self.names[int(v)] if 0 <= int(v) < len(self.names) else "" for v in values]


class ModelPanel(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.pareto = pg.PlotWidget()
        pp = self.pareto.getPlotItem()
        pp.setLabel("bottom", "weight memory (MB = 10⁶ bytes)")
        pp.setLabel("left", "perplexity, held-out mean (log)")
        pp.setTitle("Quality against size")
        pp.setLogMode(y=True)  # pruning without fine-tuning lands 100x above the rest
        style_plot(pp)
        self.speed_axis = _NameAxis("left")
        self.speed = pg.PlotWidget(axisItems={"left": self.speed_axis})
        sp = self.speed.getPlotItem()
        sp.setLabel("bottom", "decode tokens/s (greedy, 1 stream)")
        sp.setTitle("Decode speed")
        style_plot(sp)
        sp.invertY(True)
        self.sqnr = pg.PlotWidget()
        qp = self.sqnr.getPlotItem()
        qp.setLabel("bottom", "linear (layer order)")
        qp.setLabel("left", "SQNR (dB)")
        style_plot(qp)
        self.sqnr_scheme = QComboBox()
        self.sqnr_scheme.setToolTip("The scheme whose per-linear SQNR is drawn")
        self.sqnr_scheme.currentIndexChanged.connect(lambda _i: self._draw_sqnr())
        self.table = FactTable(("Scheme", "Perplexity (mean)", "Δ vs fp32", "Calib. tokens",
                                "Per held-out text", "Weights", "KV / token", "Decode tok/s",
                                "× fp32", "Runs as", "Agrees", "Quantize s", "Sample (greedy)"))
        self.table.setWordWrap(False)
        self.note = QLabel()
        self.note.setWordWrap(True)
        sqnr_row = QHBoxLayout()
        sqnr_row.addWidget(QLabel("SQNR per linear of"))
        sqnr_row.addWidget(self.sqnr_scheme, 1)
        sqnr_row.addWidget(QLabel("  ".join(
            f"<span style='color:{color(k + 4)}; font-size: 13pt'>■</span> {kind}"
            for k, kind in enumerate(LINEAR_KINDS))))
        sqnr_box = QWidget()
        box = QGridLayout(sqnr_box)
        box.setContentsMargins(0, 0, 0, 0)
        box.addLayout(sqnr_row, 0, 0)
        box.addWidget(self.sqnr, 1, 0)
        grid = QGridLayout(self)
        grid.addWidget(self.note, 0, 0, 1, 2)
        grid.addWidget(self.pareto, 1, 0)
        grid.addWidget(self.speed, 1, 1)
        grid.addWidget(sqnr_box, 2, 0, 1, 2)
        grid.addWidget(self.table, 3, 0, 1, 2)
        grid.setRowStretch(1, 5)
        grid.setRowStretch(2, 3)
        grid.setRowStretch(3, 4)
        self._runs: list = []

    def draw(self, runs, note: str = "") -> None:
        self._runs = list(runs)
        self.note.setText(note)
        self._draw_pareto()
        self._draw_speed()
        names = [r.scheme for r in self._runs if r.sqnr_db]
        current = self.sqnr_scheme.currentText()
        self.sqnr_scheme.blockSignals(True)
        self.sqnr_scheme.clear()
        self.sqnr_scheme.addItems(names)
        if current in names:
            self.sqnr_scheme.setCurrentText(current)
        elif names:
            self.sqnr_scheme.setCurrentIndex(len(names) - 1)
        self.sqnr_scheme.blockSignals(False)
        self._draw_sqnr()
        self._draw_table()

    def _draw_pareto(self) -> None:
        pp = self.pareto.getPlotItem()
        pp.clear()
        runs = self._runs
        if not runs:
            return
        pts = [(r.weight_bytes / MB, r.perplexity) for r in runs]
        right = max(x for x, _ in pts)
        for i, (r, (x, y)) in enumerate(zip(runs, pts, strict=True)):
            pp.plot([x], [y], pen=None, symbol="o", symbolSize=10, symbolBrush=color(i))
            # labels of the rightmost points hang to their left, inside the plot
            label = pg.TextItem(r.scheme, color=color(i), anchor=(1, 1) if x > 0.8 * right
                                else (0, 1))
            label.setPos(x, math.log10(y))  # items in a log-mode plot sit at log10
            pp.addItem(label)
        front = pareto_front(pts)
        pp.plot([pts[i][0] for i in front], [pts[i][1] for i in front],
                pen=pen("#7F7F7F", 1.5, dashed=True))
        base = next((r for r in runs if r.scheme == "fp32"), None)
        if base is not None:
            pp.addItem(pg.InfiniteLine(math.log10(base.perplexity), angle=0, pen=pen("#000000", 1, True),
                                       label="fp32", labelOpts={"position": 0.95}))

    def _draw_speed(self) -> None:
        sp = self.speed.getPlotItem()
        sp.clear()
        timed = [r for r in self._runs if r.decode_tokens_per_s is not None]
        self.speed_axis.names = [r.scheme for r in timed]
        if not timed:
            sp.setTitle("Decode speed (not timed)")
            return
        sp.setTitle("Decode speed")
        values = [r.decode_tokens_per_s for r in timed]
        brushes = [color(self._runs.index(r)) for r in timed]
        sp.addItem(pg.BarGraphItem(x0=0, y=np.arange(len(timed)), height=0.7,
                                   width=values, brushes=brushes))
        base = next((r for r in timed if r.scheme == "fp32"), None)
        if base is not None:
            sp.addItem(pg.InfiniteLine(base.decode_tokens_per_s, angle=90,
                                       pen=pen("#000000", 1, True)))
        sp.setYRange(-0.6, len(timed) - 0.4, padding=0)

    def _draw_sqnr(self) -> None:
        qp = self.sqnr.getPlotItem()
        qp.clear()
        run = next((r for r in self._runs if r.scheme == self.sqnr_scheme.currentText()), None)
        if run is None or not run.sqnr_db:
            qp.setTitle("SQNR per linear: run a weight scheme")
            return
        names = list(run.sqnr_db)
        exact = [n for n in names if not math.isfinite(run.sqnr_db[n])]
        qp.setTitle(f"{run.scheme}: SQNR of each quantized linear against its fp32 weight"
                    + (f" ({len(exact)} reproduced exactly: ∞, not drawn)" if exact else ""))
        for k, kind in enumerate(LINEAR_KINDS):
            idx = [i for i, n in enumerate(names) if n.rsplit(".", 1)[-1] == kind
                   and math.isfinite(run.sqnr_db[n])]
            if idx:
                qp.addItem(pg.BarGraphItem(x=np.asarray(idx), height=[run.sqnr_db[names[i]]
                                                                      for i in idx],
                                           width=0.8, brush=color(k + 4)))


    def _draw_table(self) -> None:
        base = next((r for r in self._runs if r.scheme == "fp32"), None)
        rows = []
        for r in self._runs:
            delta = "" if base is None else f"{r.perplexity - base.perplexity:+.2f}"
            speed = "—" if r.decode_tokens_per_s is None else f"{r.decode_tokens_per_s:.1f}"
            ratio = "—" if base is None or r.decode_tokens_per_s is None or \
                not base.decode_tokens_per_s else \
                f"{r.decode_tokens_per_s / base.decode_tokens_per_s:.2f}×"
            per_text = " · ".join(f"{k} {v:.2f}" for k, v in r.perplexity_by_text.items())
            rows.append((r.scheme, f"{r.perplexity:.2f}", delta,
                         f"{r.calibration_tokens:,}" if r.calibration_tokens else "—", per_text,
                         f"{r.weight_bytes / MB:.1f} MB", f"{r.kv_bytes_per_token:,} B", speed,
                         ratio, r.runs_as, f"{r.sample_agree_tokens} tok",
                         f"{r.quantize_s:.1f}", r.sample_text.replace("\n", " ⏎ "),
                         {"tip": f"{r.scheme}: {describe(r.scheme)}\n\n{r.sample_text}"}))
        self.table.set_rows(rows)
