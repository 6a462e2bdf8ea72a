"""The endpoint lab's result panels: the run's metrics table, the side-by-side table (the
endpoint, the in-app engine, the simulated GPU), and the rate sweep (the batching lab's
`RateSweepView` plot: p99 TTFT / TPOT against achieved throughput, the knee circled).

They draw what they are given and emit requests for work; they start none.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inferlab.views.batch_compare import RateSweepView
from inferlab.views.fact_table import FactTable

LATENCIES = (("ttft_s", "TTFT", "time to first token: first chunk − send"),
             ("tpot_s", "TPOT", "time per output token after the first"),
             ("itl_s", "ITL", "gap between two chunks, pooled over all requests"),
             ("e2e_s", "E2E", "end-to-end latency: last chunk − send"))


def _ms(value) -> str:
    return "—" if value is None else f"{1e3 * value:,.1f}"


def _num(value, fmt: str = "{:,.1f}") -> str:
    return "—" if value is None else fmt.format(value)


def nice_below(value: float) -> float:
    """The largest 1, 2 or 5 times a power of ten at or below `value` (> 0)."""
    decade = 10.0 ** math.floor(math.log10(value))
    return next(m * decade for m in (5, 2, 1) if m * decade <= value * (1 + 1e-12))


def _sentences(notes) -> str:
    """Notes one per line, each starting with a capital."""
    return "<br>".join(n[:1].upper() + n[1:] for n in notes if n)


def metric_rows(m: dict) -> list[tuple]:
    """(metric, value) rows of a ServingMetrics dict, units in the names."""
    if not m:
        return []
    rows = []
    for key, name, tip in LATENCIES:
        d = m.get(key) or {}
        rows.append((f"{name} p50 / p90 / p99 (ms)",
                     " / ".join(_ms(d.get(p)) for p in ("p50", "p90", "p99")), {"tip": tip}))
    rows += [
        ("Output tokens/s", _num(m.get("output_tokens_per_s"))),
        ("Requests/s", _num(m.get("request_throughput_per_s"), "{:.3g}")),
        ("Goodput (req/s, both SLOs)", _num(m.get("goodput_requests_per_s"), "{:.3g}")),
        ("Completed / failed", f"{m.get('completed', 0)} / {m.get('failed', 0)}"),
        ("Output tokens", f"{m.get('total_output_tokens', 0):,}"),
        ("Duration (s)", _num(m.get("duration_s"), "{:.2f}")),
    ]
    return rows


class MetricsPanel(QWidget):
    """The run's metrics, its notes, and the side-by-side table with its button."""

    compare_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.table = FactTable(("Metric", "Client side"))
        self.table.setMinimumWidth(330)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.notes.setStyleSheet("color: #555")
        self.compare_button = QPushButton("Run side by side")
        self.compare_button.setToolTip(
            "The same requests, sent when the client sent them, through the in-app engine "
            "(wall clock, this machine) and the simulated GPU: one metrics table")
        self.compare_button.clicked.connect(self.compare_requested)
        self.compare_status = QLabel("Needs a finished run: the same requests then go "
                                     "through the in-app engine and the simulated GPU.")
        self.compare_status.setWordWrap(True)
        self.side = FactTable(("Metric", "Endpoint", "In-app engine", "Simulated GPU"))
        self.side_notes = QLabel()
        self.side_notes.setWordWrap(True)
        self.side_notes.setStyleSheet("color: #555")
        top = QHBoxLayout()
        run_box = QVBoxLayout()
        run_box.addWidget(QLabel("<b>This run, measured by the client</b>"))
        run_box.addWidget(self.table, 1)
        top.addLayout(run_box, 1)
        notes_box = QVBoxLayout()
        notes_box.addWidget(QLabel("<b>Notes</b>"))
        notes_box.addWidget(self.notes)
        notes_box.addStretch(1)
        top.addLayout(notes_box, 1)
        row = QHBoxLayout()
        row.addWidget(QLabel("<b>Same requests, side by side</b>"))
        row.addWidget(self.compare_button)
        row.addWidget(self.compare_status, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top, 1)
        layout.addLayout(row)
        layout.addWidget(self.side, 1)
        layout.addWidget(self.side_notes)

    def show_metrics(self, metrics: dict, notes: list[str]) -> None:
        self.table.set_rows(metric_rows(metrics))
        self.notes.setText(_sentences(notes))

    def show_side(self, side: dict | None) -> None:
        cols = (side or {}).get("columns", {})
        keys = [k for k in ("endpoint", "engine", "simulated") if k in cols]
        self.side.setColumnCount(1 + len(keys) if keys else 4)
        self.side.setHorizontalHeaderLabels(
            ["Metric", *[cols[k]["title"] for k in keys]] if keys else
            ["Metric", "Endpoint", "In-app engine", "Simulated GPU"])
        per_col = [dict((r[0], r[1]) for r in metric_rows(cols[k]["metrics"])) for k in keys]
        names = [r[0] for r in metric_rows(cols[keys[0]]["metrics"])] if keys else []
        self.side.set_rows([(name, *[c.get(name, "—") for c in per_col]) for name in names])
        self.side_notes.setText(_sentences((side or {}).get("notes", ())))
        if keys:
            self.compare_status.setText("The endpoint's run beside the same requests through "
                                        "the in-app engines.")

    def set_busy(self, busy: bool, text: str = "") -> None:
        self.compare_button.setEnabled(not busy)
        if text:
            self.compare_status.setText(text)


class SweepPanel(QWidget):
    """The guidellm-style sweep: its button and the batching lab's sweep plot."""

    sweep_requested = Signal(int)  # constant rates between synchronous and throughput

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rates = QSpinBox()
        self.rates.setRange(1, 12)
        self.rates.setValue(3)
        self.rates.setSuffix(" rates between")
        self.button = QPushButton("Sweep")
        self.button.setToolTip("A synchronous run (one in flight), a throughput run (all in "
                               "flight), then constant Poisson rates evenly between them, "
                               "each a full run of the workload against the server")
        self.button.clicked.connect(lambda: self.sweep_requested.emit(self.rates.value()))
        self.status = QLabel("The sweep runs the workload several times against the server.")
        self.status.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(QLabel("Synchronous, throughput, and"))
        row.addWidget(self.rates)
        row.addWidget(self.button)
        row.addWidget(self.status, 1)
        self.plot = RateSweepView()
        controls = self.plot.layout().itemAt(0).layout()  # its own rate range: not used here
        for i in range(controls.count()):
            widget = controls.itemAt(i).widget()
            if widget is not None:
                widget.hide()
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.plot, 1)
        self.sweep = None

    def set_busy(self, busy: bool, text: str = "") -> None:
        self.button.setEnabled(not busy)
        if text:
            self.status.setText(text)

    def show_sweep(self, sweep, slo_ttft_s: float, slo_tpot_s: float) -> None:
        """An EndpointSweep (engines/endpoint/sweep.py), or None to clear."""
        self.sweep = sweep
        points = [p for p in (sweep.points if sweep else ())
                  if p.ttft_p99_s is not None and p.tpot_p99_s is not None]
        self.plot.show_points(points, slo_ttft_s, slo_tpot_s)
        for plot, field, slo in ((self.plot.ttft_plot, "ttft_p99_s", slo_ttft_s),
                                 (self.plot.tpot_plot, "tpot_p99_s", slo_tpot_s)):
            values = [1e3 * getattr(p, field) for p in points if getattr(p, field) > 0]
            if values:  # a labelled 1-2-5 tick below the lowest point, the SLO inside
                lo, hi = nice_below(min(values)), max(max(values), 1e3 * slo) * 1.15
                plot.getPlotItem().setYRange(math.log10(lo), math.log10(hi), padding=0.02)
        if sweep is not None and points:
            parts = [f"{p.strategy} {p.rate_per_s:.3g} req/s → {p.output_tokens_per_s:,.0f} "
                     f"tok/s" for p in sweep.points]
            self.status.setText(" · ".join(parts))
