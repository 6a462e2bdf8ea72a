"""The cluster lab's window: the layout and workload choices on the left with the run's
figures under them (a published trace in place of the seeded workload: views/trace_form.py);
the timeline (instances, link, KV use, utilisation) and the layout
search's heat map, the expert-parallel figures and an autoscaled fleet's replicas and
GPU-hours in tabs on the right. Choices, defaults and ranges come from the lab's
settings table (engines/labs/cluster/settings.py); the view only draws what it is given."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from inferlab.views.batch_timeline import BatchTimelineView
from inferlab.views.choices import select_choice
from inferlab.views.cluster_autoscale import ClusterAutoscale
from inferlab.views.cluster_experts import ClusterExperts
from inferlab.views.cluster_search import ClusterSearchView
from inferlab.views.cluster_timeline import ClusterTimeline, lane_label
from inferlab.views.fact_table import FactTable
from inferlab.views.trace_form import TraceForm

LAYOUT_LABELS = {"replicas": "replicas behind a router", "tp": "one tensor-parallel instance",
                 "pd": "prefill / decode split", "ep": "expert-parallel groups (MoE)"}
SEARCH_LABELS = {"replicas": "replicas × t", "pd": "P:D × t", "ep": "t × EP × replicas"}


def _ms(seconds) -> str:
    return "—" if seconds is None else f"{1e3 * seconds:.1f} ms"


def metric_rows(metrics: dict, settings: dict) -> list[tuple]:
    """The figures table: goodput first (what the lab is about), then latency, then load."""
    if not metrics:
        return []
    ttft, tpot = metrics.get("ttft_s", {}), metrics.get("tpot_s", {})
    util = metrics.get("utilization", [])
    return [
        ("Layout", f"{metrics.get('layout', '')} on {metrics.get('gpus', 0)} GPUs"),
        ("Goodput per GPU", f"{metrics.get('goodput_per_gpu', 0):.3g} requests/s",
         {"tip": "DistServe's: requests/s finishing within both SLOs, per GPU; 0 when fewer "
                 f"than {100 * settings.get('attainment', 0.9):.0f} % of requests do"}),
        ("SLO attainment", f"{100 * metrics.get('slo_attainment', 0):.1f} % within "
                           f"TTFT ≤ {_ms(settings.get('slo_ttft_s'))}, "
                           f"TPOT ≤ {_ms(settings.get('slo_tpot_s'))}"),
        ("TTFT p50 / p90", f"{_ms(ttft.get('p50'))} / {_ms(ttft.get('p90'))}"),
        ("TPOT p50 / p90", f"{_ms(tpot.get('p50'))} / {_ms(tpot.get('p90'))}"),
        ("Requests", f"{metrics.get('completed', 0)} in {metrics.get('duration_s', 0):.2f} s"),
        ("Output tokens/s", f"{metrics.get('output_tokens_per_s', 0):,.0f}"),
        ("Prefix hit rate", f"{100 * metrics.get('prefix_hit_rate', 0):.1f} %"),
        ("KV moved (Σ transfer s)", f"{metrics.get('kv_transfer_s_total', 0):.3f} s"),
        ("Utilisation min / max", f"{100 * min(util, default=0):.0f} % / "
                                  f"{100 * max(util, default=0):.0f} %"),
    ]


class ClusterView(QWidget):
    run_requested = Signal()
    search_requested = Signal(str)  # the layout kind to search
    settings_changed = Signal(dict)

    def __init__(self, settings_table: dict, parent=None):
        super().__init__(parent)
        self.table = settings_table
        form = QFormLayout()
        self.layout_kind = self._combo([(k, LAYOUT_LABELS[k]) for k in
                                        self._choices("layout")])
        self.gpus, self.tp = self._int("gpus"), self._int("tp")
        self.prefill, self.decode = self._int("prefill"), self._int("decode")
        self.prefill.setSpecialValueText("half")
        self.decode.setSpecialValueText("the rest")
        self.router = self._combo([(k, k) for k in self._choices("router")])
        self.link = self._combo([(k, k) for k in self._choices("link")])
        self.overlap = QCheckBox("KV sent during the prefill")
        self.overlap.setToolTip("pd: the KV moves layer by layer while the prefill runs "
                                "(else whole, after it)")
        self.ep = self._int("ep")
        self.ep.setToolTip("ep (and pd): GPUs per expert-parallel instance; t is the "
                           "attention's tensor degree inside it")
        self.eplb_slots = self._int("eplb_slots")
        self.eplb_slots.setSpecialValueText("no EPLB")
        self.dbo = QCheckBox("dual-batch overlap")
        self.dbo.setToolTip("two micro-batches: each one's all-to-alls hidden behind the "
                            "other's compute")
        self.expert_load = self._combo([(k, k) for k in self._choices("expert_load")
                                        if k != "counts"])  # counts: --expert-counts F
        self.zipf_skew = self._float("zipf_skew", "", 2)
        self.dtype = self._combo([(k, k) for k in self._choices("dtype")])
        self.model = self._combo([(k, k) for k in self._choices("model_config")])
        self.hardware = self._combo([(k, k) for k in self._choices("hardware")])
        self.scenario = self._combo([(k, k) for k in self._choices("scenario")])
        self.requests = self._int("requests")
        self.rate = self._float("rate_per_s", " req/s", 1)
        self.slo_ttft = self._float("slo_ttft_s", " s", 3)
        self.slo_tpot = self._float("slo_tpot_s", " s", 3)
        self.autoscale_box = QCheckBox("autoscale the replicas (KPA)")
        self.autoscale_box.setToolTip("replicas layout: Knative's concurrency autoscaler adds "
                                      "and drains replicas of t GPUs; each new one cold-starts")
        self.target = self._float("target_concurrency", " in flight", 1)
        self.min_replicas, self.max_replicas = self._int("min_replicas"), self._int(
            "max_replicas")
        self.trace_form = TraceForm(parent=self)
        for label, widget in (("Layout", self.layout_kind), ("GPUs", self.gpus),
                              ("Tensor degree t", self.tp), ("Prefill instances", self.prefill),
                              ("Decode instances", self.decode), ("Router", self.router),
                              ("Link", self.link), ("", self.overlap),
                              ("Expert-parallel degree e", self.ep),
                              ("EPLB slots per GPU", self.eplb_slots), ("", self.dbo),
                              ("Expert load", self.expert_load),
                              ("Zipf skew", self.zipf_skew), ("Model", self.model),
                              ("GPU", self.hardware), ("dtype", self.dtype),
                              ("Workload", self.scenario),
                              ("Requests", self.requests), ("Arrival rate", self.rate),
                              *self.trace_form.rows(),
                              ("TTFT SLO", self.slo_ttft), ("TPOT SLO", self.slo_tpot),
                              ("", self.autoscale_box),
                              ("Target per replica", self.target),
                              ("Min replicas", self.min_replicas),
                              ("Max replicas", self.max_replicas)):
            form.addRow(label, widget)
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Route the requests through the cluster to their end "
                                   "(simulated clock: each batch's roofline time)")
        self.search_kind = QComboBox()
        for key, label in SEARCH_LABELS.items():
            self.search_kind.addItem(label, key)
        self.search_button = QPushButton("Search layouts")
        self.search_button.setToolTip("Run every layout of the kind on this many GPUs and "
                                      "draw their goodput per GPU")
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.search_kind)
        buttons.addWidget(self.search_button)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.facts = FactTable(("Figure", "Value"))
        left = QWidget()
        column = QVBoxLayout(left)
        column.addLayout(form)
        column.addLayout(buttons)
        column.addWidget(self.status)
        column.addWidget(self.facts, 1)
        left.setMinimumWidth(360)
        scroll = QScrollArea()  # the form scrolls rather than set the window's least height
        scroll.setWidget(left)
        scroll.setWidgetResizable(True)
        scroll.setMinimumWidth(380)

        self.timeline = ClusterTimeline()
        self.search = ClusterSearchView()
        self.experts = ClusterExperts()
        self.autoscale = ClusterAutoscale()
        # one instance's requests on the batching lab's own Gantt (its scheduler's records)
        self.instance_choice = QComboBox()
        self.instance_choice.setToolTip("Whose requests the Gantt shows: each instance runs "
                                        "the batching lab's scheduler (a decode instance's "
                                        "requests arrive when their KV has landed)")
        self.requests_gantt = BatchTimelineView()
        per_instance = QWidget()
        column = QVBoxLayout(per_instance)
        column.setContentsMargins(0, 0, 0, 0)
        pick = QHBoxLayout()
        pick.addWidget(QLabel("Instance"))
        pick.addWidget(self.instance_choice, 1)
        column.addLayout(pick)
        column.addWidget(self.requests_gantt, 1)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.timeline, "Timeline")
        self.tabs.addTab(per_instance, "Requests per instance")
        self.tabs.addTab(self.experts, "Expert parallelism")
        self.tabs.addTab(self.autoscale, "Autoscaling")
        self.tabs.addTab(self.search, "Layout search")
        self.instance_choice.currentIndexChanged.connect(self._draw_instance)
        self._instances: tuple = ()
        splitter = QSplitter()
        splitter.addWidget(scroll)
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([380, 900])
        outer = QVBoxLayout(self)
        outer.addWidget(splitter)

        self.run_button.clicked.connect(self.run_requested)
        self.search_button.clicked.connect(
            lambda: self.search_requested.emit(self.search_kind.currentData()))
        self.layout_kind.currentIndexChanged.connect(self._enable_fields)
        self.ep.valueChanged.connect(self._enable_fields)
        self.expert_load.currentIndexChanged.connect(self._enable_fields)
        self.autoscale_box.toggled.connect(self._enable_fields)
        self.trace_form.changed.connect(self._enable_fields)

    # ---- widgets from the settings table -------------------------------------------------
    def _choices(self, key: str) -> tuple:
        choices = self.table[key].choices
        return tuple(choices() if callable(choices) else choices)

    @staticmethod
    def _combo(items) -> QComboBox:
        combo = QComboBox()
        for key, label in items:
            combo.addItem(label, key)
        return combo

    def _int(self, key: str) -> QSpinBox:
        box = QSpinBox()
        box.setRange(int(self.table[key].low), int(min(self.table[key].high, 2**31 - 1)))
        return box

    def _float(self, key: str, suffix: str, decimals: int) -> QDoubleSpinBox:
        box = QDoubleSpinBox()
        box.setDecimals(decimals)
        box.setRange(self.table[key].low, self.table[key].high)
        box.setSuffix(suffix)
        return box

    def _enable_fields(self) -> None:
        kind = self.layout_kind.currentData()
        self.prefill.setEnabled(kind == "pd")
        self.decode.setEnabled(kind == "pd")
        self.overlap.setEnabled(kind == "pd")
        self.tp.setEnabled(kind != "tp")
        self.ep.setEnabled(kind in ("ep", "pd"))
        expert = kind == "ep" or (kind == "pd" and self.ep.value() > 1)
        for widget in (self.eplb_slots, self.dbo, self.expert_load):
            widget.setEnabled(expert)
        self.zipf_skew.setEnabled(expert and self.expert_load.currentData() == "zipf")
        self.autoscale_box.setEnabled(kind == "replicas")
        scaled = kind == "replicas" and self.autoscale_box.isChecked()
        for widget in (self.target, self.min_replicas, self.max_replicas):
            widget.setEnabled(scaled)
        self.gpus.setEnabled(not scaled)  # an autoscaled fleet's size is its own
        seeded = self.trace_form.trace() is None  # a trace brings its own requests
        for widget in (self.scenario, self.requests, self.rate):
            widget.setEnabled(seeded)

    # ---- settings ------------------------------------------------------------------------
    def set_settings(self, s: dict) -> None:
        select_choice(self.layout_kind, s["layout"])
        for box, key in ((self.gpus, "gpus"), (self.tp, "tp"), (self.prefill, "prefill"),
                         (self.decode, "decode"), (self.requests, "requests"),
                         (self.ep, "ep"), (self.eplb_slots, "eplb_slots"),
                         (self.min_replicas, "min_replicas"),
                         (self.max_replicas, "max_replicas")):
            box.setValue(int(s[key]))
        for combo, key in ((self.router, "router"), (self.link, "link"),
                           (self.model, "model_config"), (self.hardware, "hardware"),
                           (self.scenario, "scenario"), (self.expert_load, "expert_load"),
                           (self.dtype, "dtype")):
            select_choice(combo, s[key])
        self.overlap.setChecked(bool(s["overlap_transfer"]))
        self.dbo.setChecked(bool(s["dual_batch_overlap"]))
        self.zipf_skew.setValue(float(s["zipf_skew"]))
        self.rate.setValue(float(s["rate_per_s"]))
        self.slo_ttft.setValue(float(s["slo_ttft_s"]))
        self.slo_tpot.setValue(float(s["slo_tpot_s"]))
        self.autoscale_box.setChecked(bool(s["autoscale"]))
        self.target.setValue(float(s["target_concurrency"]))
        self.trace_form.set_trace(s.get("trace"))
        self._enable_fields()

    def settings(self) -> dict:
        """The choices as settings (the lab overlays them on its own and checks them)."""
        return {"layout": self.layout_kind.currentData(), "gpus": self.gpus.value(),
                "tp": self.tp.value(), "prefill": self.prefill.value(),
                "decode": self.decode.value(), "router": self.router.currentData(),
                "link": self.link.currentData(), "overlap_transfer": self.overlap.isChecked(),
                "ep": self.ep.value(), "eplb_slots": self.eplb_slots.value(),
                "dual_batch_overlap": self.dbo.isChecked(),
                "expert_load": self.expert_load.currentData(),
                "zipf_skew": self.zipf_skew.value(), "dtype": self.dtype.currentData(),
                "model_config": self.model.currentData(),
                "hardware": self.hardware.currentData(),
                "scenario": self.scenario.currentData(), "requests": self.requests.value(),
                "rate_per_s": self.rate.value(), "slo_ttft_s": self.slo_ttft.value(),
                "slo_tpot_s": self.slo_tpot.value(),
                "autoscale": (self.autoscale_box.isChecked()
                              and self.layout_kind.currentData() == "replicas"),
                "target_concurrency": self.target.value(),
                "min_replicas": self.min_replicas.value(),
                "max_replicas": self.max_replicas.value(),
                "trace": self.trace_form.trace()}

    # ---- drawing -------------------------------------------------------------------------
    def set_busy(self, busy: bool, text: str | None = None) -> None:
        self.run_button.setEnabled(not busy)
        self.search_button.setEnabled(not busy)
        if text is not None:
            self.status.setText(text)

    def set_read_only(self, read_only: bool) -> None:
        for widget in (self.run_button, self.search_button):
            widget.setEnabled(not read_only)
        self.trace_form.set_read_only(read_only)

    def draw(self, state, metrics: dict, settings: dict) -> None:
        self.timeline.draw(state)
        self.experts.draw(state.moe_layers if state is not None else ())
        scaled = state.autoscale if state is not None else None
        self.autoscale.draw(scaled, metrics.get("autoscale"))
        if scaled is not None:  # an autoscaled run is about its fleet: show it
            self.tabs.setCurrentWidget(self.autoscale)
        self.facts.set_rows(metric_rows(metrics, settings))
        self._instances = state.instances if state is not None else ()
        chosen = max(0, self.instance_choice.currentIndex())
        self.instance_choice.blockSignals(True)
        self.instance_choice.clear()
        for inst in self._instances:
            self.instance_choice.addItem(
                f"{lane_label(inst.index, inst.role, inst.tp)}: {len(inst.requests)} "
                f"requests, {len(inst.iterations)} iterations", inst.index)
        self.instance_choice.setCurrentIndex(min(chosen, len(self._instances) - 1))
        self.instance_choice.blockSignals(False)
        self._draw_instance()

    def _draw_instance(self, *_args) -> None:
        i = self.instance_choice.currentIndex()
        if 0 <= i < len(self._instances):
            inst = self._instances[i]
            self.requests_gantt.draw(inst.requests, inst.iterations)
        else:
            self.requests_gantt.draw((), ())

    def show_search(self, summary: dict | None) -> None:
        self.search.show_summary(summary)
        if summary:
            self.tabs.setCurrentWidget(self.search)
            select_choice(self.search_kind, summary.get("kind"))  # the kind searched
