"""The batching lab's view: its controls, a status line, the run's serving metrics, and three
tabs: the request timeline (`BatchTimelineView`), two policies compared and the rate sweep
(views/batch_compare.py), and a published trace's statistics (views/trace_view.py).

It draws records (`draw(requests, iterations, metrics)`); its signals ask the lab for work.
The step slider shows the timeline up to an earlier iteration (the cursor moves there).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.hardware.presets import list_hardware_presets, load_hardware_preset
from inferlab.engines.model.cache import model_choices
from inferlab.engines.model.config import list_model_presets, load_model_preset
from inferlab.engines.serve.records import IterationRecord, RequestInfo
from inferlab.views.batch_compare import PolicyCompareView, RateSweepView
from inferlab.views.batch_timeline import BatchTimelineView
from inferlab.views.batching_choices import (
    EVICTION_LABELS,
    POLICY_LABELS,
    PREFIX_CACHE_LABELS,
    SCHEDULE_LABELS,
    WORKLOAD_LABELS,
    labelled_combo,
)
from inferlab.views.choices import kernel_choice, select_choice
from inferlab.views.fact_table import FactTable
from inferlab.views.stepped_controls import SteppedView
from inferlab.views.trace_view import TraceView

CLOCK_LABELS = (
    ("simulated", "simulated",
     "no model runs: each iteration takes the roofline time of its batch for the model "
     "config on the hardware preset"),
    ("wall", "wall (this machine)",
     "a real model runs each batch on this machine: at most 32 requests, prompts clipped to "
     "64 tokens and outputs to 32"),
)
LATENCIES = (("ttft_s", "TTFT", "time to first token: first token − arrival"),
             ("tpot_s", "TPOT", "time per output token after the first"),
             ("itl_s", "ITL", "inter-token latency, every gap of every request"),
             ("e2e_s", "E2E", "end-to-end latency: last token − arrival"))


def _preset_items(kind: str) -> list[tuple[str, str, str]]:
    """(id, name, id) of the model-config or hardware presets (engines/presets)."""
    if kind == "model":
        return [(i, load_model_preset(i).name, i) for i in list_model_presets()]
    return [(i, load_hardware_preset(i).name, i) for i in list_hardware_presets()]


def _wall_model_items() -> list[tuple[str, str, str]]:
    return [(spec, label, spec) for spec, label in model_choices() if spec != "auto"]


def _ms(value) -> str:
    return "—" if value is None else f"{1e3 * value:,.1f}"


def _slo(value) -> str:
    if value is None:
        return "—"
    return f"{value:g} s" if value >= 1 else f"{1e3 * value:g} ms"


class BatchingView(SteppedView):
    """Everything the batching lab shows. Signals ask the lab for work; `draw` shows records."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        self.requests: Sequence[RequestInfo] = ()
        self.iterations: Sequence[IterationRecord] = ()
        self.metrics: dict = {}
        self._build()

    # ---- construction ---------------------------------------------------------------------
    def _combo(self, items) -> QComboBox:
        combo = labelled_combo(items)
        combo.currentIndexChanged.connect(self._emit)
        combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        combo.setMinimumContentsLength(10)
        return combo

    def _build(self) -> None:
        self.policy = self._combo(POLICY_LABELS)
        self.policy.setToolTip("How the scheduler forms each iteration's batch")
        self.clock = self._combo(CLOCK_LABELS)
        self.scenario = self._combo(WORKLOAD_LABELS)
        self.scenario.setToolTip("What the requests share: the seeded stream shares nothing "
                                 "(requests, rate, seed apply); a scenario sizes itself")
        self.prefix_cache = self._combo(PREFIX_CACHE_LABELS)
        self.prefix_cache.setToolTip("How cached prefixes are found")
        self.schedule = self._combo(SCHEDULE_LABELS)
        self.schedule.setToolTip("Which waiting request is admitted next")
        self.eviction = self._combo(EVICTION_LABELS)
        self.eviction.setToolTip("Which cached prefix the radix tree frees first when the pool "
                                 "is full (the block hashes always free the least recently "
                                 "used)")
        self.prefix_cache.currentIndexChanged.connect(self._prefix_cache_changed)
        self.scenario.currentIndexChanged.connect(self._scenario_changed)
        self.clock.setToolTip("What an iteration's time is: the roofline model's or the "
                              "real model's on this machine")
        self.requests_spin = QSpinBox()
        self.requests_spin.setRange(1, 100_000)
        self.requests_spin.setSuffix(" req")
        self.requests_spin.setMinimumWidth(80)
        self.requests_spin.setToolTip("Requests in the seeded workload (lognormal prompt and "
                                      "output lengths)")
        self.rate = QDoubleSpinBox()
        self.rate.setRange(0.001, 100_000)
        self.rate.setDecimals(1)
        self.rate.setSuffix(" req/s")
        self.rate.setMinimumWidth(90)
        self.rate.setToolTip("Poisson arrival rate")
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setMinimumWidth(50)
        self.seed.setToolTip("Workload seed: the same seed gives the same requests")
        for spin in (self.requests_spin, self.rate, self.seed):
            spin.editingFinished.connect(self._emit)
            spin.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
        self.build_controls("iteration", "Start the run again from iteration 0 (Ctrl+R)",
                            "Run one scheduler iteration (N)",
                            "Run until every request has finished, or pause (Space)",
                            "Show the run up to an earlier iteration (drag); the latest at the "
                            "right end", 150)

        # what the clock runs: a model config on a hardware preset (simulated), or a real
        # model on this machine (wall)
        self.model_config = self._combo(_preset_items("model"))
        self.model_config.setToolTip("The simulated clock's model: its roofline cost per batch")
        self.hardware = self._combo(_preset_items("hardware"))
        self.hardware.setToolTip("The simulated clock's device: its datasheet roofs and memory "
                                 "(the KV pool is what fits beside the weights)")
        self.wall_model = self._combo(_wall_model_items())
        self.wall_model.setToolTip("The wall clock's model, run on the device chosen above")
        self.kernels = kernel_choice()
        self.kernels.currentIndexChanged.connect(self._emit)
        self.clock.currentIndexChanged.connect(self._clock_changed)
        target_row = QHBoxLayout()
        target_row.setContentsMargins(0, 0, 0, 0)
        for label, widget in (("Simulated: model", self.model_config), ("on", self.hardware),
                              ("Wall clock: model", self.wall_model),
                              ("kernels", self.kernels)):
            target_row.addWidget(QLabel(label))
            target_row.addWidget(widget, 1)
        prefix_row = QHBoxLayout()
        prefix_row.setContentsMargins(0, 0, 0, 0)
        for label, widget in (("Requests that share", self.scenario),
                              ("Prefix cache", self.prefix_cache),
                              ("evicting", self.eviction),
                              ("Admission", self.schedule)):
            prefix_row.addWidget(QLabel(label))
            prefix_row.addWidget(widget, 1)
        row = self.control_row((("Policy", self.policy, 3), ("Clock", self.clock, 2),
                                ("Workload", self.requests_spin, 0),
                                ("at", self.rate, 0), ("seed", self.seed, 0)))

        self.timeline = BatchTimelineView()
        self.metrics_title = QLabel("<b>Serving metrics</b> (finished requests so far)")
        self.metrics_table = FactTable(("Metric", "p50", "p90", "p99"))
        header = self.metrics_table.horizontalHeader()
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.Fixed)
            self.metrics_table.setColumnWidth(column, 68)
        header.setSectionResizeMode(0, QHeaderView.Stretch)
        header.setStretchLastSection(False)
        self.metrics_table.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.metrics_note = QLabel()
        self.metrics_note.setWordWrap(True)
        self.metrics_note.setStyleSheet("color: #555")
        self.metrics_table.setFixedWidth(350)
        table_column = QVBoxLayout()
        table_column.setContentsMargins(0, 0, 0, 0)
        table_column.addWidget(self.metrics_title)
        table_column.addWidget(self.metrics_table)
        metrics_row = QHBoxLayout()  # above the timeline: the timeline gets the full width
        metrics_row.setContentsMargins(0, 0, 0, 0)
        metrics_row.addLayout(table_column)
        metrics_row.addSpacing(12)
        metrics_row.addWidget(self.metrics_note, 1, Qt.AlignBottom)
        timeline_page = QWidget()
        timeline_layout = QVBoxLayout(timeline_page)
        timeline_layout.setContentsMargins(0, 0, 0, 0)
        timeline_layout.addWidget(self.timeline, 1)
        timeline_layout.addLayout(self.slider_row)
        self.compare = PolicyCompareView()
        self.sweep = RateSweepView()
        self.tabs = QTabWidget()
        self.tabs.addTab(timeline_page, "Timeline")
        self.tabs.addTab(self.compare, "Compare policies")
        self.tabs.addTab(self.sweep, "Rate sweep")
        self.trace = TraceView()
        self.tabs.addTab(self.trace, "Trace")
        self.tabs.setTabToolTip(3, "A published trace's arrivals, lengths, block reuse and "
                                   "sessions (Open trace…)")
        self.tabs.setTabToolTip(1, "Two policies over the same requests: metrics and latency "
                                   "CDFs")
        self.tabs.setTabToolTip(2, "p99 latency against throughput as the request rate grows")
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addLayout(target_row)
        layout.addLayout(prefix_row)
        layout.addWidget(self.status)
        layout.addLayout(metrics_row)
        layout.addWidget(self.tabs, 1)
        self.show_metrics({})

    # ---- settings --------------------------------------------------------------------------
    def _clock_changed(self, *_args) -> None:
        simulated = self.clock.currentData() == "simulated"
        for w in (self.model_config, self.hardware):
            w.setEnabled(simulated and not self.read_only)
        self.wall_model.setEnabled(not simulated and not self.read_only)
        self.kernels.setEnabled(not simulated and not self.read_only)

    def set_settings(self, s: dict) -> None:
        self._quiet = True
        for combo, key in ((self.policy, "policy"), (self.clock, "clock"),
                           (self.model_config, "model_config"), (self.hardware, "hardware"),
                           (self.wall_model, "model"), (self.scenario, "scenario"),
                           (self.prefix_cache, "prefix_cache"), (self.schedule, "schedule"),
                           (self.eviction, "eviction_policy")):
            index = combo.findData(s.get(key))
            if index >= 0:
                combo.setCurrentIndex(index)
        select_choice(self.kernels, s.get("kernels", "auto"))
        self.requests_spin.setValue(int(s.get("requests", 1)))
        self.rate.setValue(float(s.get("rate_per_s", 1.0)))
        self.seed.setValue(int(s.get("seed", 0)))
        self._clock_changed()
        self._scenario_changed()
        self._prefix_cache_changed()
        self._quiet = False

    def settings(self) -> dict:
        return {"policy": self.policy.currentData(), "clock": self.clock.currentData(),
                "model_config": self.model_config.currentData(),
                "hardware": self.hardware.currentData(), "model": self.wall_model.currentData(),
                "kernels": self.kernels.currentData(),
                "scenario": self.scenario.currentData(),
                "prefix_cache": self.prefix_cache.currentData(),
                "schedule": self.schedule.currentData(),
                "eviction_policy": self.eviction.currentData(),
                "requests": self.requests_spin.value(), "rate_per_s": self.rate.value(),
                "seed": self.seed.value()}

    def _emit(self, *_args) -> None:
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    def _prefix_cache_changed(self, *_args) -> None:
        """The eviction order is the radix tree's."""
        self.eviction.setEnabled(self.prefix_cache.currentData() == "radix" and
                                 not self.read_only)

    def _scenario_changed(self, *_args) -> None:
        """The request count and rate apply to the seeded stream only."""
        seeded = self.scenario.currentData() == "lognormal"
        for w in (self.requests_spin, self.rate):
            w.setEnabled(seeded and not self.read_only)

    def set_read_only(self, read_only: bool) -> None:
        super().set_read_only(read_only)
        for w in (self.policy, self.clock, self.requests_spin, self.rate, self.seed,
                  self.scenario, self.prefix_cache, self.schedule, self.compare.button,
                  self.sweep.button):
            w.setEnabled(not read_only)
        self._clock_changed()
        self._scenario_changed()
        self._prefix_cache_changed()

    # ---- drawing -----------------------------------------------------------------------------
    def clear(self, message: str = "") -> None:
        self.requests, self.iterations = (), ()
        self.timeline.draw([], [])
        self.show_metrics({})
        self.metrics_note.setText(message)
        self.clear_steps()

    def draw(self, requests: Sequence[RequestInfo], iterations: Sequence[IterationRecord],
             metrics: dict, index: int | None = None) -> None:
        """Show a run: its requests, the iterations so far, the metrics of the run so far;
        the cursor at iteration `index` (default: the latest, or where the slider was)."""
        self.requests, self.iterations, self.metrics = requests, iterations, metrics
        index = self.follow(len(iterations), index)
        self.show_metrics(metrics)
        self.show_step(index)

    def show_step(self, index: int) -> None:
        its = self.iterations
        self.timeline.draw(self.requests, its, index if its else None)
        if its and index == len(its) - 1:
            self.timeline.fit()  # following the latest iteration: keep it in view
        if not its:
            self.step_label.setText("iteration —")
            return
        rec = its[index]
        unit = "s simulated" if rec.clock == "simulated" else "s"
        self.step_label.setText(f"iteration {rec.index} / {its[-1].index}, "
                                f"t = {rec.end_s:.3g} {unit}")

    def show_metrics(self, m: dict) -> None:
        rows = []
        for key, name, tip in LATENCIES:
            d = m.get(key) or {}
            rows.append((f"{name} (ms)", _ms(d.get("p50")), _ms(d.get("p90")),
                         _ms(d.get("p99")), {"tip": tip}))
        self.metrics_table.set_rows(rows)
        t = self.metrics_table
        t.setFixedHeight(t.horizontalHeader().height() + sum(
            t.rowHeight(r) for r in range(t.rowCount())) + 2 * t.frameWidth())
        done = m.get("completed")
        tok = m.get("output_tokens_per_s")
        goodput = m.get("goodput_requests_per_s")
        slo = m.get("slo_s") or {}
        duration = m.get("duration_s")
        tokens = m.get("total_output_tokens")
        # each figure as its formula with this run's numbers (as the other labs show them)
        if tok is not None and duration and tokens is not None:
            throughput = (f"Output throughput = {tokens:,} tokens ÷ {duration:.3g} s "
                          f"(first arrival → last token) = <b>{tok:,.0f} tok/s</b>")
        else:
            throughput = "Output throughput = output tokens ÷ run time: — tok/s"
        objectives = (f"TTFT ≤ {_slo(slo.get('ttft_s'))} and TPOT ≤ {_slo(slo.get('tpot_s'))}"
                      if slo else "the SLOs")
        if goodput is not None and duration:
            good = round(goodput * duration)
            goodput_text = (f"Goodput = {good} of {done} requests meeting {objectives} ÷ "
                            f"{duration:.3g} s = <b>{goodput:.2f} req/s</b>")
        else:
            goodput_text = f"Goodput = requests meeting {objectives} ÷ run time: —"
        lines = [
            throughput, goodput_text,
            "TTFT = first token − arrival; TPOT = (E2E − TTFT) ÷ (output tokens − 1); "
            "ITL: every gap between two tokens, pooled (vLLM's definitions)",
            f"Preemptions: <b>{m.get('preemptions', 0)}</b> (a preempted request recomputes "
            "its KV cache) · prefix hit rate = cached prompt tokens ÷ prompt tokens = "
            f"<b>{m.get('prefix_hit_rate', 0.0):.0%}</b>",
        ]
        if done is not None:
            lines.append(f"{done} requests finished, {m.get('iterations', 0)} iterations")
        self.metrics_note.setText("<br>".join(lines))
