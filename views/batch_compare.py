"""Two batching policies side by side, and the throughput-latency sweep over request rate.

`PolicyCompareView`: two policy choosers and Compare; a metrics table (p50 / p99 of each
latency, throughput, goodput, preemptions for A and B, and B / A) and the TTFT and TPOT CDFs
of both (x in ms, log). `RateSweepView`: a rate range and Sweep; p99 TTFT and p99 TPOT
against the achieved output throughput, one curve per policy, each point a rate; the knee
(the highest rate meeting both SLOs at p99) circled, the SLOs as dashed lines.

Both draw what they are given (`show_runs`, `show_points`) and emit requests for work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.servelab.compare import latency_cdf
from inferlab.engines.servelab.compare_records import knee
from inferlab.views.axes import LogSIAxis
from inferlab.views.fact_table import FactTable
from inferlab.views.style import color, pen, style_plot

POLICY_NAMES = {"continuous": "continuous, chunked", "continuous-no-chunking":
                "continuous, no chunking", "static": "static"}
POLICY_COLORS = {"static": 1, "continuous": 0, "continuous-no-chunking": 2}


def _ms(seconds) -> str:
    return "—" if seconds is None else f"{1e3 * seconds:,.1f}"


def _ratio(a, b) -> str:
    if a is None or b is None or not a:
        return "—"
    return f"{b / a:.3g}×"


def _policy_combo(default: str) -> QComboBox:
    combo = QComboBox()
    for value, label in POLICY_NAMES.items():
        combo.addItem(label, value)
    combo.setCurrentIndex(combo.findData(default))
    return combo


def _log_ms_plot(title: str, x_label: str, y_label: str, log_y: bool = False) -> pg.PlotWidget:
    axes = {"bottom": LogSIAxis("bottom")} if not log_y else {"left": LogSIAxis("left")}
    widget = pg.PlotWidget(background="w", axisItems=axes)
    plot = widget.getPlotItem()
    style_plot(plot)
    plot.setTitle(title, color="#222", size="10pt")
    plot.setLabel("bottom", x_label)
    plot.setLabel("left", y_label)
    plot.addLegend(offset=(10, 10) if not log_y else (-10, 10), labelTextColor="#222")
    widget.setMinimumHeight(220)
    return widget


class PolicyCompareView(QWidget):
    compare_requested = Signal(tuple)  # (policy A, policy B)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.policy_a = _policy_combo("static")
        self.policy_b = _policy_combo("continuous")
        self.button = QPushButton("Compare")
        self.button.setToolTip("Run both policies over the same seeded requests (the workload "
                               "and clock chosen above) to the end")
        self.button.clicked.connect(self._request)
        self.status = QLabel("Compare runs two policies over the same requests.")
        self.status.setWordWrap(True)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for label, widget in (("Policy A", self.policy_a), ("vs B", self.policy_b)):
            row.addWidget(QLabel(label))
            row.addWidget(widget)
        row.addWidget(self.button)
        row.addWidget(self.status, 1)
        self.table = FactTable(("Metric", "A", "B", "B / A"))
        self.table.setMinimumWidth(380)
        self.ttft_plot = _log_ms_plot("TTFT, cumulative", "time to first token (ms, log)",
                                      "requests at or below (%)")
        # TPOT spans a few milliseconds (no decade to mark on a log axis): linear
        self.tpot_plot = _log_ms_plot("TPOT, cumulative", "time per output token (ms)",
                                      "requests at or below (%)")
        self.ttft_plot.getPlotItem().setLogMode(x=True, y=False)
        for w in (self.ttft_plot, self.tpot_plot):
            w.getPlotItem().setYRange(0, 100, padding=0.02)
        plots = QHBoxLayout()
        plots.addWidget(self.table, 0)
        plots.addWidget(self.ttft_plot, 1)
        plots.addWidget(self.tpot_plot, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addLayout(plots, 1)
        self.runs: Sequence = ()
        self.show_runs(())

    def policies(self) -> tuple[str, str]:
        return self.policy_a.currentData(), self.policy_b.currentData()

    def set_policies(self, a: str, b: str) -> None:
        for combo, value in ((self.policy_a, a), (self.policy_b, b)):
            index = combo.findData(value)
            if index >= 0:
                combo.setCurrentIndex(index)

    def _request(self) -> None:
        self.compare_requested.emit(self.policies())

    def set_busy(self, busy: bool, text: str = "") -> None:
        self.button.setEnabled(not busy)
        if text:
            self.status.setText(text)

    def show_runs(self, runs: Sequence) -> None:
        """`runs`: PolicyRun A then B (engines/servelab/compare.py), or () to clear."""
        self.runs = runs
        a = runs[0].metrics if len(runs) > 0 else {}
        b = runs[1].metrics if len(runs) > 1 else {}

        def dist(m, key, p):
            return (m.get(key) or {}).get(p)

        rows = []
        for key, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")):
            for p in ("p50", "p99"):
                va, vb = dist(a, key, p), dist(b, key, p)
                rows.append((f"{name} {p} (ms)", _ms(va), _ms(vb), _ratio(va, vb)))
        for key, name, fmt in (("output_tokens_per_s", "Output tok/s", "{:,.0f}"),
                               ("goodput_requests_per_s", "Goodput (req/s)", "{:.2f}"),
                               ("preemptions", "Preemptions", "{:d}")):
            va, vb = a.get(key), b.get(key)
            rows.append((name, "—" if va is None else fmt.format(va),
                         "—" if vb is None else fmt.format(vb), _ratio(va, vb)))
        self.table.set_rows(rows)
        for plot, field in ((self.ttft_plot, "ttft_s"), (self.tpot_plot, "tpot_s")):
            item = plot.getPlotItem()
            item.clear()
            for tag, run in zip("AB", runs, strict=False):
                values = [1e3 * v for v in getattr(run, field) if v and v > 0]
                if not values:
                    continue
                x, y = latency_cdf(values)
                item.plot(x, 100 * y, stepMode=None, name=f"{tag}: {POLICY_NAMES[run.policy]}",
                          pen=pen(POLICY_COLORS.get(run.policy, 3), width=2))


class RateSweepView(QWidget):
    sweep_requested = Signal(float, float, int)  # low, high (req/s), points

    def __init__(self, parent=None):
        super().__init__(parent)
        self.low = QDoubleSpinBox()
        self.high = QDoubleSpinBox()
        for spin, value in ((self.low, 1.0), (self.high, 256.0)):
            spin.setRange(0.001, 100_000)
            spin.setDecimals(2)
            spin.setSuffix(" req/s")
            spin.setValue(value)
        self.points_spin = QSpinBox()
        self.points_spin.setRange(1, 24)
        self.points_spin.setValue(8)
        self.points_spin.setSuffix(" rates")
        self.button = QPushButton("Sweep")
        self.button.setToolTip("One full run per rate (log-spaced) for both policies of the "
                               "Compare tab: where does p99 latency blow up?")
        self.button.clicked.connect(self._request)
        self.status = QLabel("The sweep runs both compared policies at each rate.")
        self.status.setWordWrap(True)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for label, widget in (("Rates from", self.low), ("to", self.high),
                              ("in", self.points_spin)):
            row.addWidget(QLabel(label))
            row.addWidget(widget)
        row.addWidget(self.button)
        row.addWidget(self.status, 1)
        self.ttft_plot = _log_ms_plot("p99 TTFT against throughput",
                                      "achieved output throughput (tok/s)",
                                      "p99 TTFT (ms, log)", log_y=True)
        self.tpot_plot = _log_ms_plot("p99 TPOT against throughput",
                                      "achieved output throughput (tok/s)",
                                      "p99 TPOT (ms, log)", log_y=True)
        for w in (self.ttft_plot, self.tpot_plot):
            w.getPlotItem().setLogMode(x=False, y=True)
        plots = QHBoxLayout()
        plots.addWidget(self.ttft_plot, 1)
        plots.addWidget(self.tpot_plot, 1)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #555")
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addLayout(plots, 1)
        layout.addWidget(self.note)
        self.points: Sequence = ()

    def _request(self) -> None:
        self.sweep_requested.emit(self.low.value(), self.high.value(), self.points_spin.value())

    def set_busy(self, busy: bool, text: str = "") -> None:
        self.button.setEnabled(not busy)
        if text:
            self.status.setText(text)

    def show_points(self, points: Sequence, slo_ttft_s: float, slo_tpot_s: float) -> None:
        """`points`: SweepPoints (engines/servelab/compare.py) of one or more policies."""
        self.points = points
        policies = list(dict.fromkeys(p.policy for p in points))
        knees = {}
        for plot, field, slo in ((self.ttft_plot, "ttft_p99_s", slo_ttft_s),
                                 (self.tpot_plot, "tpot_p99_s", slo_tpot_s)):
            item = plot.getPlotItem()
            item.clear()
            item.addLine(y=math.log10(1e3 * slo), pen=pen("#444", dashed=True),
                         label=f"SLO {1e3 * slo:g} ms",
                         labelOpts={"position": 0.02, "color": "#444",
                                    "anchors": [(0, 1), (0, 1)]})  # left-aligned, above
            for policy in policies:
                mine = sorted((p for p in points if p.policy == policy),
                              key=lambda p: p.rate_per_s)
                c = POLICY_COLORS.get(policy, 3)
                item.plot([p.output_tokens_per_s for p in mine],
                          [1e3 * getattr(p, field) for p in mine], pen=pen(c, width=2),
                          symbol="o", symbolSize=7, symbolBrush=color(c), symbolPen=None,
                          name=POLICY_NAMES.get(policy, policy))
                best = knee(mine, policy, slo_ttft_s, slo_tpot_s)
                if best is not None:
                    knees[policy] = best
                    item.plot([best.output_tokens_per_s], [1e3 * getattr(best, field)],
                              pen=None, symbol="o", symbolSize=16, symbolBrush=None,
                              symbolPen=pg.mkPen(color(c), width=2))
        lines = []
        for policy in policies:
            best = knees.get(policy)
            name = POLICY_NAMES.get(policy, policy)
            lines.append(f"{name}: knee at <b>{best.rate_per_s:.3g} req/s</b> "
                         f"({best.output_tokens_per_s:,.0f} tok/s) meets both SLOs at p99"
                         if best else f"{name}: no swept rate meets both SLOs at p99")
        if points:
            lines.append("Each point is one full run at a Poisson rate (circled: the knee, "
                         f"the highest rate with p99 TTFT ≤ {1e3 * slo_ttft_s:g} ms and p99 "
                         f"TPOT ≤ {1e3 * slo_tpot_s:g} ms).")
        self.note.setText("<br>".join(lines))
