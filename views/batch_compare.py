"""Two batching runs side by side, and the throughput-latency sweep over request rate.

`PolicyCompareView`: two variant choosers (policy, prefix cache, queue order: two policies,
block hashes vs the radix tree, FCFS vs LPM on the same requests) and Compare; a metrics
table (p50 / p99 of each latency, throughput, goodput, prefix hit rate, preemptions for A and
B, and B / A) and the TTFT and TPOT CDFs of both (x in ms, log). `RateSweepView`: a rate range
and Sweep; p99 TTFT and p99 TPOT against the achieved output throughput, one curve per
variant, each point a rate; the knee
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

from inferlab.engines.labs.batching.compare import latency_cdf, variant_label, varied_keys
from inferlab.engines.serve.metrics import knee
from inferlab.views.axes import LogSIAxis
from inferlab.views.batching_choices import (
    POLICY_LABELS,
    PREFIX_CACHE_LABELS,
    SCHEDULE_LABELS,
    labelled_combo,
)
from inferlab.views.choices import select_choice
from inferlab.views.fact_table import FactTable
from inferlab.views.style import color, pen, style_plot

CHOICES = {"policy": POLICY_LABELS, "prefix_cache": PREFIX_CACHE_LABELS,
           "schedule": SCHEDULE_LABELS}
NAMES = {key: {value: label for value, label, _tip in items} for key, items in CHOICES.items()}
NAMES["prefix_cache"] = {"hash": "block hashes", "radix": "radix tree", "none": "no cache"}
VARIANT_COLORS = (1, 0, 2, 3, 4, 5)  # A, B, then any further curves of a sweep


def variant_name(variant: dict, differs) -> str:
    """A run's legend name: its values of the keys its comparison varies (the policy when
    none does)."""
    return variant_label(variant, differs, NAMES, ", ")


def _ms(seconds) -> str:
    return "—" if seconds is None else f"{1e3 * seconds:,.1f}"


def _ratio(a, b) -> str:
    if a is None or b is None or not a:
        return "—"
    return f"{b / a:.3g}×"


def _variant_key(point) -> tuple:
    """A sweep point's curve: its variant's items (the endpoint lab's points: the policy)."""
    variant = getattr(point, "variant", None) or {"policy": point.policy}
    return tuple(variant.items())


class VariantChooser(QWidget):
    """A run's policy, prefix cache and queue order: three combos in a row."""

    def __init__(self, policy: str, parent=None):
        super().__init__(parent)
        self.combos: dict[str, QComboBox] = {k: labelled_combo(CHOICES[k]) for k in CHOICES}
        select_choice(self.combos["policy"], policy)
        self.combos["policy"].setToolTip("How the scheduler forms each iteration's batch")
        self.combos["prefix_cache"].setToolTip("How cached prefixes are found")
        self.combos["schedule"].setToolTip("Which waiting request is admitted next")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        for combo in self.combos.values():
            combo.setSizeAdjustPolicy(QComboBox.AdjustToContents)
            row.addWidget(combo)

    def variant(self) -> dict:
        return {k: combo.currentData() for k, combo in self.combos.items()}

    def set_variant(self, variant: dict) -> None:
        for k, value in variant.items():
            select_choice(self.combos[k], value)


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
    compare_requested = Signal(tuple)  # (variant A, variant B): dicts of VARIANT_KEYS

    def __init__(self, parent=None):
        super().__init__(parent)
        self.variant_a = VariantChooser("static")
        self.variant_b = VariantChooser("continuous")
        self.button = QPushButton("Compare")
        self.button.setToolTip("Run A and B over the same requests (the workload and clock "
                               "chosen above) to the end")
        self.button.clicked.connect(self._request)
        self.status = QLabel("Compare runs A and B over the same requests: two policies, two "
                             "prefix caches (block hashes vs the radix tree) or two queue "
                             "orders.")
        self.status.setWordWrap(True)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for label, widget in (("A", self.variant_a), ("vs B", self.variant_b)):
            row.addWidget(QLabel(label))
            row.addWidget(widget)
        row.addWidget(self.button)
        row.addStretch(1)
        top = QVBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.setSpacing(2)
        top.addLayout(row)
        top.addWidget(self.status)
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
        layout.addLayout(top)
        layout.addLayout(plots, 1)
        self.runs: Sequence = ()
        self.show_runs(())

    def variants(self) -> tuple[dict, dict]:
        return self.variant_a.variant(), self.variant_b.variant()

    def set_variants(self, a: dict, b: dict) -> None:
        self.variant_a.set_variant(a)
        self.variant_b.set_variant(b)

    def _request(self) -> None:
        self.compare_requested.emit(self.variants())

    def set_busy(self, busy: bool, text: str = "") -> None:
        self.button.setEnabled(not busy)
        if text:
            self.status.setText(text)

    def show_runs(self, runs: Sequence) -> None:
        """`runs`: PolicyRun A then B (engines/labs/batching/compare.py), or () to clear."""
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
                               ("prefix_hit_rate", "Prefix hit rate", "{:.1%}"),
                               ("preemptions", "Preemptions", "{:d}")):
            va, vb = a.get(key), b.get(key)
            rows.append((name, "—" if va is None else fmt.format(va),
                         "—" if vb is None else fmt.format(vb), _ratio(va, vb)))
        self.table.set_rows(rows)
        differs = varied_keys([r.variant for r in runs])
        for plot, field in ((self.ttft_plot, "ttft_s"), (self.tpot_plot, "tpot_s")):
            item = plot.getPlotItem()
            item.clear()
            for i, (tag, run) in enumerate(zip("AB", runs, strict=False)):
                values = [1e3 * v for v in getattr(run, field) if v and v > 0]
                if not values:
                    continue
                x, y = latency_cdf(values)
                item.plot(x, 100 * y, stepMode=None,
                          name=f"{tag}: {variant_name(run.variant, differs)}",
                          pen=pen(VARIANT_COLORS[i], width=2))


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
        self.button.setToolTip("One full run per rate (log-spaced) for A and B of the Compare "
                               "tab, on the seeded stream: where does p99 latency blow up?")
        self.button.clicked.connect(self._request)
        self.status = QLabel("The sweep runs A and B of the Compare tab at each rate (the "
                             "seeded stream: a scenario sets its own arrivals).")
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
        """`points`: SweepPoints (engines/labs/batching/compare.py) of one or more variants."""
        self.points = points
        keys = list(dict.fromkeys(_variant_key(p) for p in points))
        differs = varied_keys([dict(k) for k in keys]) if len(keys) > 1 else []
        names = {k: variant_name(dict(k), differs) for k in keys}
        knees = {}
        for plot, field, slo in ((self.ttft_plot, "ttft_p99_s", slo_ttft_s),
                                 (self.tpot_plot, "tpot_p99_s", slo_tpot_s)):
            item = plot.getPlotItem()
            item.clear()
            item.addLine(y=math.log10(1e3 * slo), pen=pen("#444", dashed=True),
                         label=f"SLO {1e3 * slo:g} ms",
                         labelOpts={"position": 0.02, "color": "#444",
                                    "anchors": [(0, 1), (0, 1)]})  # left-aligned, above
            for i, key in enumerate(keys):
                mine = sorted((p for p in points if _variant_key(p) == key),
                              key=lambda p: p.rate_per_s)
                c = VARIANT_COLORS[i % len(VARIANT_COLORS)]
                item.plot([p.output_tokens_per_s for p in mine],
                          [1e3 * getattr(p, field) for p in mine], pen=pen(c, width=2),
                          symbol="o", symbolSize=7, symbolBrush=color(c), symbolPen=None,
                          name=names[key])
                best = knee(mine, dict(key)["policy"], slo_ttft_s, slo_tpot_s)
                if best is not None:
                    knees[key] = best
                    item.plot([best.output_tokens_per_s], [1e3 * getattr(best, field)],
                              pen=None, symbol="o", symbolSize=16, symbolBrush=None,
                              symbolPen=pg.mkPen(color(c), width=2))
        lines = []
        for key in keys:
            best = knees.get(key)
            name = names[key]
            lines.append(f"{name}: knee at <b>{best.rate_per_s:.3g} req/s</b> "
                         f"({best.output_tokens_per_s:,.0f} tok/s) meets both SLOs at p99"
                         if best else f"{name}: no swept rate meets both SLOs at p99")
        if points:
            lines.append("Each point is one full run at a Poisson rate (circled: the knee, "
                         f"the highest rate with p99 TTFT ≤ {1e3 * slo_ttft_s:g} ms and p99 "
                         f"TPOT ≤ {1e3 * slo_tpot_s:g} ms).")
        self.note.setText("<br>".join(lines))
