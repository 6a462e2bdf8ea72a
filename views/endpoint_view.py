"""The endpoint lab's view: the server, workload and limits on the left (the API key masked,
held by its field alone; the workload the seeded one, InferLab's JSONL or a published trace,
chosen with Trace…: views/endpoint_workload.py); Run / Stop, progress and a status line; tabs
for the requests' timeline with the server's strips, the metrics (and the side-by-side table),
the rate sweep.

It draws records and emits requests for work; it contacts nothing.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.endpoint.client import APIS, SERVER_KINDS
from inferlab.engines.endpoint.routing import ROUTERS
from inferlab.engines.hardware.presets import list_hardware_presets, load_hardware_preset
from inferlab.engines.labs.endpoint.settings import ENDPOINT_DEFAULTS
from inferlab.engines.model.cache import model_choices
from inferlab.engines.model.config import list_model_presets, load_model_preset
from inferlab.views.endpoint_results import MetricsPanel, SweepPanel
from inferlab.views.endpoint_timeline import EndpointTimelineView
from inferlab.views.endpoint_workload import WorkloadSource

PACING = (("concurrency", "fixed concurrency"), ("arrivals", "arrival times (Poisson / trace)"))


def _wall_models() -> list[tuple[str, str]]:
    return [(spec, label) for spec, label in model_choices() if spec != "auto"]


def _presets(kind: str) -> list[tuple[str, str]]:
    if kind == "model":
        return [(i, load_model_preset(i).name) for i in list_model_presets()]
    return [(i, load_hardware_preset(i).name) for i in list_hardware_presets()]


def _spin(low, high, suffix: str, decimals: int | None = None, step: float | None = None):
    spin = QDoubleSpinBox() if decimals is not None else QSpinBox()
    spin.setRange(low, high)
    if decimals is not None:
        spin.setDecimals(decimals)
    if step is not None:
        spin.setSingleStep(step)
    spin.setSuffix(suffix)
    return spin


class EndpointView(QWidget):
    settings_changed = Signal(dict)
    run_requested = Signal()
    stop_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        self._had_file = False  # a trace or workload file was chosen, as last seen
        self._seeded_requests: int | None = None  # Requests before it was chosen here
        self._build_controls()
        self.timeline = EndpointTimelineView()
        self.metrics = MetricsPanel()
        self.sweep = SweepPanel()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.timeline, "Requests and server")
        self.tabs.addTab(self.metrics, "Metrics")
        self.tabs.addTab(self.sweep, "Rate sweep")
        layout = QHBoxLayout(self)
        layout.addWidget(self.left, 0)
        layout.addWidget(self.tabs, 1)
        self.set_running(False)

    # ---- construction -------------------------------------------------------------------------
    def _build_controls(self) -> None:
        self.url = QLineEdit()
        self.url.setToolTip("The server's root; only this URL is ever contacted, and only "
                            "when you press Run. Several roots, separated by spaces: "
                            "replicas the load is spread over by the router")
        self.router = QComboBox()
        for policy in ROUTERS:
            self.router.addItem(policy, policy)
        self.router.setToolTip("With several URLs: round-robin, least-tokens (the server "
                               "with the fewest outstanding tokens) or prefix (the server "
                               "sent the longest prefix of the prompt)")
        self.model = QLineEdit()
        self.model.setPlaceholderText("first at /v1/models")
        self.api = QComboBox()
        self.api.addItems(list(APIS))
        self.server_kind = QComboBox()
        self.server_kind.addItems(["auto", *SERVER_KINDS])
        self.server_kind.setToolTip("Which length controls are sent (ignore_eos, min_tokens); "
                                    "auto: guessed from /v1/models")
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.Password)
        self.api_key.setPlaceholderText("none")
        self.api_key.setToolTip("Sent as a bearer token to this URL only; kept in memory, "
                                "never saved, exported or logged")
        self.api_key_env = QLineEdit()
        self.api_key_env.setPlaceholderText("e.g. OPENAI_API_KEY")
        self.api_key_env.setToolTip("Read the key from this environment variable when the "
                                    "field above is empty")
        server = QGroupBox("Server")
        f = QFormLayout(server)
        f.addRow("URL", self.url)
        f.addRow("Router", self.router)
        f.addRow("Model", self.model)
        f.addRow("API", self.api)
        f.addRow("Server kind", self.server_kind)
        f.addRow("API key", self.api_key)
        f.addRow("Key from env", self.api_key_env)

        self.source = WorkloadSource(parent=self)
        self.requests = _spin(1, 10_000, " req")
        self.requests.setToolTip("The seeded workload's requests; with a trace, the most sent "
                                 "(choosing one sets the most there is: all, as run endpoint "
                                 "--trace sends)")
        self.rate = _spin(0.001, 100_000, " req/s", 2)
        self.seed = _spin(0, 2**31 - 1, "")
        self.pacing = QComboBox()
        for value, label in PACING:
            self.pacing.addItem(label, value)
        self.concurrency = _spin(1, 10_000, " in flight")
        workload = QGroupBox("Workload")
        f = QFormLayout(workload)
        self.source.add_rows(f)
        f.addRow("Requests", self.requests)
        f.addRow("Rate", self.rate)
        f.addRow("Seed", self.seed)
        f.addRow("Pacing", self.pacing)
        f.addRow("Concurrency", self.concurrency)

        self.slo_ttft = _spin(0.001, 3_600_000, " ms", 1, 50)
        self.slo_tpot = _spin(0.001, 3_600_000, " ms", 1, 5)
        self.max_duration = _spin(1, 86_400, " s", 0, 10)
        self.scrape_hz = _spin(0, 4, " Hz", 0, 1)
        self.scrape_hz.setToolTip("Polls of the server's /metrics per second (0: none)")
        limits = QGroupBox("SLOs and limits")
        f = QFormLayout(limits)
        f.addRow("TTFT SLO", self.slo_ttft)
        f.addRow("TPOT SLO", self.slo_tpot)
        f.addRow("Stop after", self.max_duration)
        f.addRow("Scrape /metrics", self.scrape_hz)

        self.engine_model = QComboBox()
        self.engine_model.setToolTip("The in-app engine's model, run on this machine's wall "
                                     "clock")
        self.model_config = QComboBox()
        self.model_config.setToolTip("The simulated GPU's model: its roofline time per batch")
        self.hardware = QComboBox()
        self.hardware.setToolTip("The simulated GPU")
        for combo, items in ((self.engine_model, _wall_models()),
                             (self.model_config, _presets("model")),
                             (self.hardware, _presets("hardware"))):
            for value, label in items:
                combo.addItem(label, value)
        side = QGroupBox("Side by side with")
        f = QFormLayout(side)
        f.addRow("In-app model", self.engine_model)
        f.addRow("Simulated", self.model_config)
        f.addRow("on", self.hardware)

        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Probe the server, then send the workload")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Cancel the requests in flight and close every connection")
        self.run_button.clicked.connect(self.run_requested)
        self.stop_button.clicked.connect(self.stop_requested)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.status = QLabel()
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.stop_button)

        inner = QWidget()
        v = QVBoxLayout(inner)
        v.setContentsMargins(0, 0, 4, 0)
        for box in (server, workload, limits, side):
            v.addWidget(box)
        v.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(inner)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        for w in self.inputs():  # long preset names and wide ranges must not widen it
            w.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
            w.setMinimumWidth(90)
        self.left = QWidget()
        lv = QVBoxLayout(self.left)  # Run / Stop stay in view however the form scrolls
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(scroll, 1)
        lv.addLayout(buttons)
        lv.addWidget(self.progress)
        lv.addWidget(self.status)
        self.left.setFixedWidth(340)

        self.router.currentIndexChanged.connect(self._emit)
        for w in (self.url, self.model, self.api_key_env):
            w.editingFinished.connect(self._emit)
        self.source.changed.connect(self._source_changed)
        for w in (self.api, self.server_kind, self.pacing, self.engine_model,
                  self.model_config, self.hardware):
            w.currentIndexChanged.connect(self._emit)
        for w in (self.requests, self.rate, self.seed, self.concurrency, self.slo_ttft,
                  self.slo_tpot, self.max_duration, self.scrape_hz):
            w.editingFinished.connect(self._emit)
        self.pacing.currentIndexChanged.connect(self._enable_dependent)

    def _enable_dependent(self, *_args) -> None:
        """Concurrency only for fixed concurrency, the rate only for the seeded workload."""
        editable = self.run_button.isEnabled()
        self.concurrency.setEnabled(editable and self.pacing.currentData() == "concurrency")
        self.rate.setEnabled(editable and not self.source.is_set())

    def _source_changed(self) -> None:
        """A trace chosen where there was none is sent as `run endpoint --trace` sends it: at
        its arrival times, all of it; cleared, the seeded workload's count comes back (the
        default's, when the trace came with the settings)."""
        chosen = self.source.is_set()
        self._quiet = True  # one settings_changed for the whole edit
        try:
            if chosen and not self._had_file:
                self._seeded_requests = self.requests.value()
                self.requests.setValue(self.requests.maximum())
                self.pacing.setCurrentIndex(self.pacing.findData("arrivals"))
            elif not chosen and self._had_file:
                self.requests.setValue(self._seeded_requests
                                       or ENDPOINT_DEFAULTS["requests"])
                self._seeded_requests = None
        finally:
            self._quiet = False
        self._had_file = chosen
        self._enable_dependent()
        self._emit()

    # ---- settings -----------------------------------------------------------------------------
    def set_settings(self, s: dict) -> None:
        self._quiet = True
        try:
            self.url.setText(" ".join([s["url"], *s.get("urls", [])]))
            self.router.setCurrentIndex(max(0, self.router.findData(s.get("router"))))
            self.model.setText(s["model"])
            self.api.setCurrentText(s["api"])
            self.server_kind.setCurrentText(s["server_kind"])
            self.api_key_env.setText(s["api_key_env"])
            self.source.set_settings(s)
            self._had_file, self._seeded_requests = self.source.is_set(), None
            self.requests.setValue(int(s["requests"]))
            self.rate.setValue(float(s["rate_per_s"]))
            self.seed.setValue(int(s["seed"]))
            self.pacing.setCurrentIndex(0 if s["concurrency"] else 1)
            if s["concurrency"]:
                self.concurrency.setValue(int(s["concurrency"]))
            self.slo_ttft.setValue(1e3 * float(s["slo_ttft_s"]))
            self.slo_tpot.setValue(1e3 * float(s["slo_tpot_s"]))
            self.max_duration.setValue(float(s["max_duration_s"]))
            self.scrape_hz.setValue(float(s["scrape_hz"]))
            self.sweep.rates.setValue(int(s["sweep_rates"]))
            for combo, key in ((self.engine_model, "engine_model"),
                               (self.model_config, "model_config"), (self.hardware, "hardware")):
                i = combo.findData(s[key])
                if i < 0:  # a path or a name not in the list: shown as it is
                    combo.addItem(s[key], s[key])
                    i = combo.count() - 1
                combo.setCurrentIndex(i)
        finally:
            self._quiet = False
        self._enable_dependent()

    def settings(self) -> dict:
        """What the controls say (never the key: it is read with `key_text`)."""
        paced = self.pacing.currentData() == "arrivals"
        return {
            "url": (self.url.text().replace(",", " ").split() or [""])[0],
            "urls": self.url.text().replace(",", " ").split()[1:],
            "router": self.router.currentData(), "model": self.model.text().strip(),
            "api": self.api.currentText(), "server_kind": self.server_kind.currentText(),
            "api_key_env": self.api_key_env.text().strip(),
            **self.source.settings(),
            "requests": self.requests.value(), "rate_per_s": self.rate.value(),
            "seed": self.seed.value(), "concurrency": 0 if paced else self.concurrency.value(),
            "slo_ttft_s": self.slo_ttft.value() / 1e3, "slo_tpot_s": self.slo_tpot.value() / 1e3,
            "max_duration_s": self.max_duration.value(), "scrape_hz": self.scrape_hz.value(),
            "sweep_rates": self.sweep.rates.value(),
            "engine_model": self.engine_model.currentData(),
            "model_config": self.model_config.currentData(),
            "hardware": self.hardware.currentData(),
        }

    def key_text(self) -> str:
        return self.api_key.text()

    def _emit(self, *_args) -> None:
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    # ---- state --------------------------------------------------------------------------------
    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def set_progress(self, fraction: float, message: str = "") -> None:
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
        if message:
            self.status.setText(message)

    def inputs(self):
        return (self.url, self.router, self.model, self.api, self.server_kind, self.api_key,
                self.api_key_env, self.requests, self.rate, self.seed,
                self.pacing, self.concurrency, self.slo_ttft, self.slo_tpot,
                self.max_duration, self.scrape_hz, self.engine_model, self.model_config,
                self.hardware)

    def set_running(self, running: bool, read_only: bool = False) -> None:
        for w in self.inputs():
            w.setEnabled(not running and not read_only)
        self.run_button.setEnabled(not running and not read_only)
        self.stop_button.setEnabled(running)
        self.metrics.compare_button.setEnabled(not running and not read_only)
        self.sweep.button.setEnabled(not running and not read_only)
        self.source.set_read_only(running or read_only)
        self._enable_dependent()
        if not running:
            self.progress.setValue(0)
