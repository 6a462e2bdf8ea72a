"""The step lab's settings form: the model, the phase (decode at batch B over a context of C
tokens, or prefill of N tokens), the executions compared (ticked: eager, torch.compile, the
native decoder), the profiled steps and the threads, and Run / Cancel with a progress bar. It
holds settings and emits them (`settings_changed`, `run_requested`); it starts nothing."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.labs.step.settings import EXECUTIONS, PHASES, STEP_SETTINGS
from inferlab.views.choices import refill_choices, select_choice

EXECUTION_LABELS = {"eager": "eager", "compile": "torch.compile", "native": "native"}
EXECUTION_TIPS = {
    "eager": "torch's ops one by one: the reference every other execution's logits are "
             "checked against",
    "compile": "torch.compile (inductor, default mode) of the same model: seen kernel by "
               "kernel; its first call compiles (about 2 minutes for SmolLM2 on 2 cores, "
               "then cached on disk)",
    "native": "the native kernels: the decoder's layers in one C call, each kernel timed by "
              "the decoder itself (CPU only)"}


class StepForm(QWidget):
    """The settings row. `settings()` / `set_settings()` use the lab's settings dict."""

    settings_changed = Signal(dict)
    run_requested = Signal()
    cancel_requested = Signal()
    open_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        self.model = QComboBox()
        self.model.setToolTip("The model profiled: SmolLM2 (auto, when installed), the seeded "
                              "tiny model, or a GGUF file or Hugging Face folder (Open…)")
        self.model.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.model.setMinimumContentsLength(14)
        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip("A GGUF file, or a Hugging Face folder's config.json")
        self.open_button.clicked.connect(self.open_requested)
        self.phase = QComboBox()
        for phase in PHASES:
            self.phase.addItem(phase, phase)
        self.phase.setToolTip("decode: B sequences' next token over C cached tokens each; "
                              "prefill: one prompt of N tokens")
        self.batch = self._spin(STEP_SETTINGS["batch"], "B: sequences, one token each")
        self.context = self._spin(STEP_SETTINGS["context"], "C: tokens already cached per "
                                  "sequence")
        self.tokens = self._spin(STEP_SETTINGS["tokens"], "N: the prompt's tokens")
        self.executions = {}
        for name in EXECUTIONS:
            box = QCheckBox(EXECUTION_LABELS[name])
            box.setToolTip(EXECUTION_TIPS[name])
            box.toggled.connect(self._emit)
            self.executions[name] = box
        self.repeats = self._spin(STEP_SETTINGS["repeats"], "Steps timed and profiled; the "
                                  "median one is shown")
        self.threads = self._spin(STEP_SETTINGS["threads"], "torch's intra-op threads")
        self.threads.setSpecialValueText("all")
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Profile the step under each ticked execution, on the same "
                                   "inputs")
        self.run_button.clicked.connect(self.run_requested)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setVisible(False)  # shown while work runs
        self.progress.setMaximumWidth(110)
        self.phase.currentIndexChanged.connect(self._emit)
        self.model.currentIndexChanged.connect(self._emit)

        first, second = QHBoxLayout(), QHBoxLayout()
        for label, widget in (("Model", self.model), ("", self.open_button),
                              ("Phase", self.phase), ("B", self.batch), ("C", self.context),
                              ("N", self.tokens)):
            if label:
                first.addWidget(QLabel(label))
            first.addWidget(widget)
        first.addStretch(1)
        second.addWidget(QLabel("Executions"))
        for box in self.executions.values():
            second.addWidget(box)
        second.addSpacing(8)
        for label, widget in (("Repeats", self.repeats), ("Threads", self.threads)):
            second.addWidget(QLabel(label))
            second.addWidget(widget)
        second.addStretch(1)
        for widget in (self.run_button, self.cancel_button, self.progress):
            second.addWidget(widget)
        rows = QVBoxLayout(self)
        rows.setContentsMargins(0, 0, 0, 0)
        rows.setSpacing(2)
        rows.addLayout(first)
        rows.addLayout(second)

    def _spin(self, setting, tip: str) -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(int(setting.low), int(setting.high))
        spin.setToolTip(tip)
        spin.setKeyboardTracking(False)
        spin.valueChanged.connect(self._emit)
        return spin

    # ---- settings ----------------------------------------------------------------------------
    def set_models(self, items) -> None:
        """(spec, label) pairs of the model combo."""
        self._quiet = True
        refill_choices(self.model, items)
        self._quiet = False

    def set_settings(self, s: dict) -> None:
        self._quiet = True
        try:
            model = s["model"]
            if self.model.findData(model) < 0:
                self.model.addItem(model, model)
            select_choice(self.model, model)
            select_choice(self.phase, s["phase"])
            self.batch.setValue(int(s["batch"]))
            self.context.setValue(int(s["context"]))
            self.tokens.setValue(int(s["tokens"]))
            for name, box in self.executions.items():
                box.setChecked(name in s["executions"])
            self.repeats.setValue(int(s["repeats"]))
            self.threads.setValue(int(s["threads"]))
        finally:
            self._quiet = False
        self._enable_phase()

    def settings(self) -> dict:
        return {"model": self.model.currentData() or "auto",
                "phase": self.phase.currentData(), "batch": self.batch.value(),
                "context": self.context.value(), "tokens": self.tokens.value(),
                "executions": [n for n, box in self.executions.items() if box.isChecked()],
                "repeats": self.repeats.value(), "threads": self.threads.value()}

    def _enable_phase(self) -> None:
        decode = self.phase.currentData() == "decode"
        self.batch.setEnabled(decode and self.run_button.isEnabled())
        self.context.setEnabled(decode and self.run_button.isEnabled())
        self.tokens.setEnabled(not decode and self.run_button.isEnabled())

    def _emit(self, *_args) -> None:
        self._enable_phase()
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    # ---- state -------------------------------------------------------------------------------
    def set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        self.progress.setVisible(busy)
        if not busy:
            self.progress.setValue(0)

    def set_read_only(self, read_only: bool) -> None:
        for widget in (self.model, self.open_button, self.phase, self.repeats, self.threads,
                       self.run_button, *self.executions.values()):
            widget.setEnabled(not read_only)
        self.cancel_button.setEnabled(False)
        self._enable_phase()

    def set_progress(self, fraction: float | None, _message: str = "") -> None:
        if fraction is not None:
            self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
