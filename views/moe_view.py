"""The MoE lab's view: its inputs (model, batch B, prompts, steps, the B sweep, kernels), the
step controls, and what a decode step's routers did: tokens per expert as a layer × expert
heat map, the top-k router weights and the load imbalance per MoE layer (this step, or summed
over the run up to it), the experts the step touched beside E·(1 − (1 − k/E)^B), the grouped
expert product against the per-token loop, the B sweep, and the closed forms with the
numbers substituted.

It draws records (`draw(info, steps)`, `draw_sweep`, `show_formulas`); its signals ask the
lab for work. The step slider shows an earlier step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
)

from inferlab.engines.labs.moe.records import BatchPoint, MoERunInfo, MoEStepRecord
from inferlab.engines.labs.moe.settings import MAX_BATCH, MOE_SETTINGS
from inferlab.engines.roofline.units import format_bytes
from inferlab.views.choices import kernel_choice, refill_choices, select_choice
from inferlab.views.fact_table import FactTable
from inferlab.views.moe_formulas import MoEFormulas
from inferlab.views.moe_routing import ExpertHeatMap, ImbalancePlot, TopKWeights, imbalance
from inferlab.views.moe_steps import DistinctExperts, GroupedTimes
from inferlab.views.moe_sweep import SweepBytes, SweepTimes
from inferlab.views.stepped_controls import SteppedView

SCOPES = (("step", "this step"), ("run", "the run up to this step"))
"""What the routing plots (heat map, top-k weights, imbalance) show."""
MAX_SWEEP = MOE_SETTINGS["sweep"].max_len
MIB = 2**20


def parse_sweep(text: str) -> list[int] | None:
    """"1, 2, 4" as [1, 2, 4] ("" or "none": []); None where it is not batches in
    1…MAX_BATCH, at most MAX_SWEEP of them."""
    text = text.strip()
    if text.lower() in ("", "none"):
        return []
    try:
        batches = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        return None
    ok = len(batches) <= MAX_SWEEP and all(1 <= b <= MAX_BATCH for b in batches)
    return batches if ok else None


class _RunTotals:
    """The routing summed over steps 0…i of a list of records, kept as the list grows (the
    latest step is what a live run shows: each draw adds the new records only)."""

    def __init__(self) -> None:
        self.key, self.n = None, 0
        self.counts = self.hist = self.ranks = None

    def upto(self, steps: Sequence[MoEStepRecord], index: int):
        """(counts [layers, experts], top-k histogram, mean weight by rank) over steps
        0…index."""
        key = (id(steps), id(steps[0]))
        if key != self.key or index + 1 < self.n:
            first = steps[0]
            self.key, self.n = key, 0
            self.counts = np.zeros(np.shape(first.expert_counts), np.int64)
            self.hist = np.zeros(len(first.topk_weight_hist), np.int64)
            self.ranks = np.zeros(np.shape(first.topk_weight_mean)[1:], np.float64)
        for r in steps[self.n:index + 1]:
            self.counts += np.asarray(r.expert_counts, np.int64)
            self.hist += np.asarray(r.topk_weight_hist, np.int64)
            self.ranks += np.asarray(r.topk_weight_mean, np.float64).mean(axis=0)
        self.n = index + 1
        return self.counts, self.hist, self.ranks / self.n


class MoEView(SteppedView):
    """Everything the MoE lab shows. Signals ask the lab for work; `draw` shows records."""

    open_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        self.info: MoERunInfo | None = None
        self.steps: Sequence[MoEStepRecord] = ()
        self.sweep: Sequence[BatchPoint] = ()
        self._totals = _RunTotals()
        self._sweep_text = "1,2,4,8,16,32"
        self._build()

    # ---- construction ---------------------------------------------------------------------
    def _spin(self, low: int, high: int, tip: str) -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(low, high)
        spin.setToolTip(tip)
        spin.editingFinished.connect(self._emit)
        spin.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
        return spin

    def _build(self) -> None:
        self.model = QComboBox()
        self.model.setToolTip("The MoE model decoded: the seeded tiny MoE, or a MoE GGUF file "
                              "or Hugging Face folder opened with Open…")
        self.model.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.model.setMinimumContentsLength(16)
        self.model.currentIndexChanged.connect(self._emit)
        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip("A MoE GGUF file, or a Hugging Face folder's config.json")
        self.open_button.clicked.connect(self.open_requested)
        self.batch = self._spin(1, MAX_BATCH, "B: sequences decoded at once, one token each "
                                "per step")
        self.prompts = self._spin(1, MOE_SETTINGS["prompts"].high,
                                  "Shipped prompts used, cycled over the batch")
        self.n_steps = self._spin(1, MOE_SETTINGS["steps"].high, "Decode steps recorded")
        self.sweep_edit = QLineEdit(self._sweep_text)
        self.sweep_edit.setToolTip(f"Batches of the B sweep, comma-separated (each 1…"
                                   f"{MAX_BATCH}, at most {MAX_SWEEP}; empty: none); it runs "
                                   "once the batch's steps are done")
        self.sweep_edit.setMaximumWidth(130)
        self.sweep_edit.editingFinished.connect(self._sweep_edited)
        self.kernels = kernel_choice()
        self.kernels.currentIndexChanged.connect(self._emit)
        self.build_controls("step", "Decode the prompts again from the start (Ctrl+R)",
                            "One decode step of the B sequences (N)",
                            "Run the remaining steps, then the B sweep; or pause (Space)",
                            "Show an earlier step (drag); the latest at the right end", 190)
        controls = self.control_row((("Model", self.model, 2), ("", self.open_button, 0),
                                     ("Batch B", self.batch, 0),
                                     ("Prompts", self.prompts, 0),
                                     ("Steps", self.n_steps, 0),
                                     ("Sweep B", self.sweep_edit, 0),
                                     ("Kernels", self.kernels, 0)))

        self.scope = QComboBox()
        for key, label in SCOPES:
            self.scope.addItem(label, key)
        self.scope.setToolTip("The heat map, top-k weights and imbalance: the shown step's "
                              "routing, or every step's up to it summed")
        self.scope.currentIndexChanged.connect(lambda _i: self._redraw())
        self.slider_row.insertWidget(0, QLabel("Routing of"))
        self.slider_row.insertWidget(1, self.scope)
        self.slider_row.insertSpacing(2, 12)

        self.heat = ExpertHeatMap()
        self.topk = TopKWeights()
        self.imbalance = ImbalancePlot()
        self.distinct = DistinctExperts()
        self.times = GroupedTimes()
        self.sweep_bytes = SweepBytes()
        self.sweep_times = SweepTimes()
        self.formulas = MoEFormulas()
        self.formulas.setFixedWidth(300)
        self.facts = FactTable(("Run", "Value"))
        self.facts.setMinimumSize(180, 150)
        self.facts.setWordWrap(False)

        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(4)
        for widget, row, col, span in ((self.heat, 0, 0, 2), (self.topk, 0, 2, 1),
                                       (self.imbalance, 1, 0, 1), (self.distinct, 1, 1, 1),
                                       (self.times, 1, 2, 1), (self.sweep_bytes, 2, 0, 1),
                                       (self.sweep_times, 2, 1, 1), (self.facts, 2, 2, 1)):
            grid.addWidget(widget, row, col, 1, span)
        for i in range(3):
            grid.setColumnStretch(i, 1)
            grid.setRowStretch(i, 1)
        body = QHBoxLayout()
        body.setContentsMargins(0, 0, 0, 0)
        body.addLayout(grid, 1)
        body.addWidget(self.formulas)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.status)
        layout.addLayout(self.slider_row)
        layout.addLayout(body, 1)
        self.clear("")

    # ---- settings --------------------------------------------------------------------------
    def set_models(self, items) -> None:
        """(spec, label) pairs of the model combo."""
        self._quiet = True
        refill_choices(self.model, items)
        self._quiet = False

    def set_settings(self, s: dict) -> None:
        self._quiet = True
        model = s.get("model", "tiny-moe")
        if self.model.findData(model) < 0:
            self.model.addItem(model, model)
        select_choice(self.model, model)
        self.batch.setValue(int(s.get("batch", 32)))
        self.prompts.setValue(int(s.get("prompts", 32)))
        self.n_steps.setValue(int(s.get("steps", 8)))
        self._sweep_text = ",".join(str(b) for b in s.get("sweep", []))
        self.sweep_edit.setText(self._sweep_text)
        select_choice(self.kernels, s.get("kernels", "auto"))
        self._quiet = False

    def settings(self) -> dict:
        return {"model": self.model.currentData(), "batch": self.batch.value(),
                "prompts": self.prompts.value(), "steps": self.n_steps.value(),
                "sweep": parse_sweep(self._sweep_text) or [],
                "kernels": self.kernels.currentData()}

    def _sweep_edited(self) -> None:
        text = self.sweep_edit.text()
        if parse_sweep(text) is None:  # not batches: the last good text back
            self.sweep_edit.setText(self._sweep_text)
            self.set_status(f"Sweep B: “{text}” is not batches 1…{MAX_BATCH} separated by "
                            "commas; the sweep stays as it was.", error=True)
            return
        self._sweep_text = text
        self._emit()

    def _emit(self, *_args) -> None:
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    def set_read_only(self, read_only: bool) -> None:
        super().set_read_only(read_only)
        for w in (self.model, self.open_button, self.batch, self.prompts, self.n_steps,
                  self.sweep_edit, self.kernels):
            w.setEnabled(not read_only)

    # ---- drawing -----------------------------------------------------------------------------
    def clear(self, message: str = "") -> None:
        self.info, self.steps = None, ()
        self.clear_steps()
        for plot in (self.heat, self.topk, self.imbalance, self.distinct, self.times):
            plot.clear_data()
        self.heat.plot.setTitle(message or "Tokens per expert", size="10pt")
        self.draw_sweep((), None)
        self.show_formulas([])

    def draw(self, info: MoERunInfo | None, steps: Sequence[MoEStepRecord],
             index: int | None = None) -> None:
        """Show a run's steps so far, step `index` (default: the latest, or where the slider
        was)."""
        if info is None:
            self.clear("")
            return
        self.info, self.steps = info, steps
        index = self.follow(len(steps), index)
        if steps:
            self.show_step(index)
        else:
            self.step_label.setText("step —")
            self._show_facts(None)

    def _redraw(self) -> None:
        if self.steps and self.index >= 0:
            self.show_step(self.index)

    def show_step(self, index: int) -> None:
        info, r = self.info, self.steps[index]
        layers = list(info.moe_layers)
        if self.scope.currentData() == "run":
            counts, hist, ranks = self._totals.upto(self.steps, index)
            spread = imbalance(counts)
            which = f"steps 0–{r.step}" if index else "step 0"
        else:
            counts, hist = r.expert_counts, r.topk_weight_hist
            ranks = np.asarray(r.topk_weight_mean, np.float64).mean(axis=0)
            spread, which = r.imbalance_max_over_mean, f"step {r.step}"
        self.heat.draw(counts, layers, f"Tokens per expert, {which} (B = {r.batch}, "
                                       f"k = {info.top_k})")
        self.topk.draw(hist, list(ranks))
        self.imbalance.draw(spread, layers)
        self.distinct.draw(r.distinct_experts, layers, r.distinct_experts_formula,
                           info.n_experts)
        self.times.draw(r.grouped_s, r.per_token_s)
        self.step_label.setText(f"step {r.step} / {self.steps[-1].step}: {r.batch} tokens, "
                                f"{r.step_s * 1e3:.1f} ms, "
                                f"{r.weight_bytes_per_step / MIB:.1f} MiB read")
        self._show_facts(r)

    def _show_facts(self, r: MoEStepRecord | None) -> None:
        """The run's model and, for step `r`, its figures; the B sweep's latest point."""
        info = self.info
        if info is None:
            self.facts.set_rows([])
            return
        rows = [("model", info.model_name),
                ("layout", f"{info.family}, {info.weight_format}, {info.kernel_path} kernels"),
                ("experts", f"E = {info.n_experts}, k = {info.top_k}, in "
                            f"{len(info.moe_layers)} of {info.n_layers} layers"),
                ("parameters", f"{info.params_active / 1e6:,.2f}M of "
                               f"{info.params_total / 1e6:,.2f}M active "
                               f"({info.params_active / max(info.params_total, 1):.1%})"),
                ("weights", f"{format_bytes(info.weight_bytes_total)}: "
                            f"{format_bytes(info.dense_bytes)} dense, "
                            f"{format_bytes(max(info.expert_bytes, default=0))} an expert")]
        if r is not None:
            rows += [("read this step", f"{format_bytes(r.weight_bytes_per_step)} (closed form "
                                        f"{format_bytes(r.weight_bytes_per_step_formula)})"),
                     ("grouped vs loop", f"outputs differ by at most "
                                         f"{r.grouped_max_abs_diff:.2g}")]
        if self.sweep:
            b = self.sweep[-1]
            rows.append((f"sweep, B = {b.batch}", f"{b.tokens_per_s:,.0f} tokens/s, "
                                                  f"{b.step_s * 1e3:.1f} ms a step"))
        self.facts.set_rows([(name, value, {"tip": value}) for name, value in rows])

    def draw_sweep(self, points: Sequence[BatchPoint], info: MoERunInfo | None) -> None:
        """The B sweep's points so far (`info`: the run's, for the dense and all-weights
        lines)."""
        self.sweep = points
        total = info.weight_bytes_total if info is not None else 0
        dense = info.dense_bytes if info is not None else 0
        self.sweep_bytes.draw(points, total, dense)
        self.sweep_times.draw(points)

    def show_formulas(self, pairs) -> None:
        self.formulas.show_pairs(pairs)
