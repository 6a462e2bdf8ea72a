"""The speculative lab's K sweep: measured wall-clock speedup against K beside the model
E / (K·c + 1), and tokens per target forward against (1 − α^(K+1)) / (1 − α)."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from inferlab.engines.speculative.statistics import break_even_alpha
from inferlab.views.style import pen, style_plot

MEASURED = "#D55E00"
MODEL = "#555555"
TOKENS = "#0072B2"


class SweepPanel(QWidget):
    sweep_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.plot = pg.PlotWidget()
        p = self.plot.getPlotItem()
        style_plot(p)
        p.setTitle("Speedup against K (greedy)")
        p.setXRange(0.5, 8.5, padding=0)
        p.setLabel("bottom", "K: draft tokens per step")
        p.setLabel("left", "× plain · tokens/fwd")
        p.setMouseEnabled(x=False, y=False)
        self.measured = p.plot([], [], pen=pen(MEASURED, 2), symbol="o", symbolBrush=MEASURED,
                               symbolPen=None, name="measured wall clock")
        self.model = p.plot([], [], pen=pen(MODEL, 2, dashed=True), symbol="t",
                            symbolBrush=MODEL, symbolPen=None,
                            name="model Σ E(kᵢ) / Σ (kᵢ·c + v(kᵢ))")
        self.tokens = p.plot([], [], pen=pen(TOKENS, 1), symbol="s", symbolBrush=TOKENS,
                             symbolPen=None, name="tokens per target forward")
        p.addItem(pg.InfiniteLine(1.0, angle=0, pen=pen("#000000", 1, dashed=True)))
        self.sweep_button = QPushButton("Sweep K")
        self.sweep_button.setToolTip("Decode the prompt plainly, then speculatively with K = 1, "
                                     "2, 3, 4, 6, 8 (greedy), timing each in this run")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.sweep_button.clicked.connect(self.sweep_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        # the key sits under the plot: inside, on a lab-sized plot, it covered the points at
        # small K, where the best K often is
        self.key = QLabel(" ".join(
            f'<span style="color:{color}">{glyph}</span>&nbsp;{text}' for color, glyph, text in (
                (MEASURED, "●", "measured wall clock"),
                (MODEL, "▼", "model Σ E(kᵢ) / Σ (kᵢ·c + v(kᵢ))"),
                (TOKENS, "■", "tokens per target forward"))))
        self.key.setWordWrap(True)
        self.note = QLabel("Sweep K: how far the speedup follows the model for this drafter.")
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #555")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.sweep_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.note, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.key)
        self.sweep = None

    def set_busy(self, busy: bool, read_only: bool = False) -> None:
        self.sweep_button.setEnabled(not busy and not read_only)
        self.cancel_button.setEnabled(busy)

    def set_note(self, text: str) -> None:
        self.note.setText(text)

    def draw(self, sweep) -> None:
        """A `KSweep` (engines/labs/speculative/sweep.py) or None."""
        self.sweep = sweep
        points = () if sweep is None else sweep.points
        ks = [p.k for p in points]
        self.measured.setData(ks, [p.speedup_wall for p in points])
        self.model.setData(ks, [p.predicted_speedup for p in points])
        self.tokens.setData(ks, [p.tokens_per_target_forward for p in points])
        if sweep is None or not points:
            return
        best = max(points, key=lambda p: p.speedup_wall)
        c = sum(p.cost_ratio for p in points) / len(points)
        same = all(p.outputs_equal for p in points)
        v = "" if best.verify_cost_ratio is None else f", v({best.k}) = {best.verify_cost_ratio:.2f}"
        which = f"K = {best.k}" if len(points) == 1 else f"best K = {best.k}"
        model = f"model {best.predicted_speedup:.2f}×"
        if best.predicted_speedup_wall is not None:  # the prefill is in both wall times
            model += (f" on the decode steps, {best.predicted_speedup_wall:.2f}× with the "
                      f"prefill, {best.prefill_s / best.plain_s:.0%} of plain's time, unshortened")
        self.note.setText(
            f"{sweep.drafter} on {sweep.model}: {which} at <b>{best.speedup_wall:.2f}×</b> plain "
            f"decoding's wall clock ({model}; c = {c:.2f}{v}); {pays_text(best)} "
            "Outputs " + ("equal plain greedy's." if same else "DIFFER from plain greedy's."))


def pays_text(point) -> str:
    """Where a K pays, in the point's own measured costs: the break-even acceptance
    (statistics.break_even_alpha) beside the run's α."""
    v = 1.0 if point.verify_cost_ratio is None else point.verify_cost_ratio
    need = break_even_alpha(point.k, point.cost_ratio, max(1.0, v))
    if need is None:
        return (f"at K = {point.k} no acceptance pays: even all drafts accepted ({point.k + 1} "
                f"tokens) cost more than the step's {point.k}·c + v (this run's α is "
                f"<b>{point.alpha:.2f}</b>).")
    return (f"K = {point.k} pays above α = {need:.2f}, and this run's α is "
            f"<b>{point.alpha:.2f}</b>.")
