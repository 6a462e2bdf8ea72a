"""The quantization lab's view: the controls on the left; a layer tab (one linear under one
scheme) and a model tab (every scheme run: quality, size, speed, samples) on the right."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.labs.quant.evaluation import describe
from inferlab.engines.labs.quant.settings import LINEAR_CHOICES, lab_schemes, layer_schemes
from inferlab.views.choices import kernel_choice, refill_choices, select_choice
from inferlab.views.quant_layer import LayerPanel
from inferlab.views.quant_model import ModelPanel

BASELINE_NOTE = (
    "SmolLM2-135M ships as a Q4_1 GGUF (llama.cpp's 4-bit: groups of 32, fp16 scale and "
    "minimum). Its weights dequantized to fp32 are this lab's “fp32” model: every scheme "
    "re-quantizes those. Perplexity is the mean over three held-out texts (prose, dialogue, "
    "technical), never the calibration set GPTQ, AWQ and Wanda see (16 other texts, 35k "
    "tokens, assets/text/calibration).")
FULL_CONTEXT = 3
"""The window spin box's value that means the model's whole context (shown in words)."""


class QuantView(QWidget):
    settings_changed = Signal(dict)
    run_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        self.model = QComboBox()
        self.model.setToolTip("The model every scheme quantizes")
        self.layer = QSpinBox()
        self.layer.setRange(0, 0)
        self.layer.setToolTip("Decoder layer whose linear is drawn")
        self.linear = QComboBox()
        self.linear.addItems(list(LINEAR_CHOICES))
        self.linear.setToolTip("qkv and gate_up are the fused matrices the model holds")
        self.layer_scheme = QComboBox()
        for name in layer_schemes():
            self.layer_scheme.addItem(name, name)
            self.layer_scheme.setItemData(self.layer_scheme.count() - 1, describe(name),
                                          Qt.ToolTipRole)
        layer_box = QGroupBox("Layer")
        lf = QFormLayout(layer_box)
        lf.addRow("Model", self.model)
        self.kernels = kernel_choice()
        self.kernels.setToolTip("Which kernels the fp32 model (the baseline, and what every "
                                "fake-quantized scheme runs on) uses: native or torch's ops; "
                                "the INT8 / INT4 codes always run on the native low-bit kernels")
        self.kernels.currentIndexChanged.connect(self._emit)
        lf.addRow("Kernels", self.kernels)
        lf.addRow("Layer", self.layer)
        lf.addRow("Linear", self.linear)
        lf.addRow("Scheme", self.layer_scheme)

        self.schemes = QListWidget()
        for name in lab_schemes():
            item = QListWidgetItem(name)
            item.setFlags(item.flags() | Qt.ItemIsUserCheckable)
            item.setCheckState(Qt.Unchecked)
            item.setToolTip(describe(name))
            self.schemes.addItem(item)
        self.measure_speed = QCheckBox("Time decode tokens/s")
        self.decode_tokens = QSpinBox()
        self.decode_tokens.setRange(2, 512)
        self.decode_tokens.setSuffix(" tokens")
        self.run_button = QPushButton("Run schemes")
        self.run_button.setToolTip("Quantize, score, time and sample every checked scheme "
                                   "(GPTQ and AWQ calibrate for minutes on a CPU)")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.run_button.clicked.connect(self.run_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        runs_box = QGroupBox("Whole-model runs")
        rv = QVBoxLayout(runs_box)
        rv.addWidget(self.schemes, 1)
        rv.addWidget(self.measure_speed)
        row = QHBoxLayout()
        row.addWidget(QLabel("Timed"))
        row.addWidget(self.decode_tokens, 1)
        rv.addLayout(row)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        rv.addLayout(buttons)
        rv.addWidget(self.progress)

        self.ppl_convention = QComboBox()
        self.ppl_convention.addItem("sliding windows", "sliding")
        self.ppl_convention.addItem("llama.cpp (llama-perplexity)", "llama.cpp")
        self.ppl_convention.setToolTip(
            "sliding: windows of the given size every stride tokens, each token scored once "
            "(Hugging Face's convention); llama.cpp: chunks of n_ctx = the window, the second "
            "half of each scored, as llama-perplexity -c prints")
        self.ppl_window = QSpinBox()
        self.ppl_window.setRange(FULL_CONTEXT, 1 << 20)
        self.ppl_window.setSpecialValueText("model's context")
        self.ppl_window.setSuffix(" tokens")
        self.ppl_window.setToolTip("Tokens per window (llama.cpp: n_ctx); the lowest value is "
                                   "the model's whole context")
        self.ppl_stride = QSpinBox()
        self.ppl_stride.setRange(0, 1 << 20)
        self.ppl_stride.setSpecialValueText("window − 1")
        self.ppl_stride.setSuffix(" tokens")
        self.ppl_stride.setToolTip("Tokens from one sliding window's start to the next's")
        ppl_box = QGroupBox("Perplexity")
        pf = QFormLayout(ppl_box)
        pf.addRow("Convention", self.ppl_convention)
        pf.addRow("Window", self.ppl_window)
        pf.addRow("Stride", self.ppl_stride)

        self.status = QLabel()
        self.status.setWordWrap(True)
        baseline = QLabel(BASELINE_NOTE)
        baseline.setWordWrap(True)
        baseline.setStyleSheet("color: #555")
        left = QVBoxLayout()
        left.addWidget(layer_box)
        left.addWidget(runs_box, 1)
        left.addWidget(ppl_box)
        left.addWidget(self.status)
        left.addWidget(baseline)
        left_widget = QWidget()
        left_widget.setLayout(left)
        # the controls scroll when the window is short (the window's minimum height stays
        # what the other labs need)
        left_scroll = QScrollArea()
        left_scroll.setWidget(left_widget)
        left_scroll.setWidgetResizable(True)
        left_scroll.setFrameShape(QScrollArea.NoFrame)
        left_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        left_scroll.setMaximumWidth(330)
        left_scroll.setMinimumWidth(left_widget.minimumSizeHint().width())

        self.layer_panel = LayerPanel()
        self.model_panel = ModelPanel()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.layer_panel, "Layer")
        self.tabs.addTab(self.model_panel, "Model")
        layout = QHBoxLayout(self)
        layout.addWidget(left_scroll)
        layout.addWidget(self.tabs, 1)

        for w in (self.model, self.linear, self.layer_scheme, self.ppl_convention):
            w.currentIndexChanged.connect(self._emit)
        for w in (self.layer, self.decode_tokens, self.ppl_window, self.ppl_stride):
            w.valueChanged.connect(self._emit)
        self.measure_speed.toggled.connect(self._emit)
        self.schemes.itemChanged.connect(lambda _item: self._emit())

    # inputs ---------------------------------------------------------------------------------
    def set_models(self, models: list[tuple[str, str]]) -> None:
        self._quiet = True
        refill_choices(self.model, models)
        self._quiet = False

    def set_n_layers(self, n_layers: int) -> None:
        self.layer.setRange(0, max(0, n_layers - 1))
        self.layer.setSuffix(f" of 0–{max(0, n_layers - 1)}")

    def set_settings(self, s: dict) -> None:
        self._quiet = True
        try:
            i = self.model.findData(s["model"])
            if i >= 0:
                self.model.setCurrentIndex(i)
            self.layer.setValue(int(s["layer"]))
            self.linear.setCurrentText(s["linear"])
            self.layer_scheme.setCurrentIndex(max(0, self.layer_scheme.findData(s["layer_scheme"])))
            wanted = set(s["schemes"])
            for i in range(self.schemes.count()):
                item = self.schemes.item(i)
                item.setCheckState(Qt.Checked if item.text() in wanted else Qt.Unchecked)
            self.measure_speed.setChecked(bool(s["measure_speed"]))
            self.decode_tokens.setValue(int(s["decode_tokens"]))
            select_choice(self.kernels, s.get("kernels", "auto"))
            select_choice(self.ppl_convention, s.get("ppl_convention", "sliding"))
            window = s.get("ppl_window_tokens", 1024)
            self.ppl_window.setValue(FULL_CONTEXT if window is None else int(window))
            self.ppl_stride.setValue(int(s.get("ppl_stride_tokens") or 0))
            self.ppl_stride.setEnabled(self.ppl_convention.currentData() == "sliding")
        finally:
            self._quiet = False

    def settings(self) -> dict:
        return {
            "model": self.model.currentData() or "auto",
            "layer": self.layer.value(),
            "linear": self.linear.currentText(),
            "layer_scheme": self.layer_scheme.currentData(),
            "schemes": [self.schemes.item(i).text() for i in range(self.schemes.count())
                        if self.schemes.item(i).checkState() == Qt.Checked],
            "measure_speed": self.measure_speed.isChecked(),
            "decode_tokens": self.decode_tokens.value(),
            "kernels": self.kernels.currentData(),
            "ppl_convention": self.ppl_convention.currentData(),
            "ppl_window_tokens": None if self.ppl_window.value() == FULL_CONTEXT
            else self.ppl_window.value(),
            "ppl_stride_tokens": None if self.ppl_stride.value() == 0 or
            self.ppl_convention.currentData() != "sliding" else self.ppl_stride.value(),
        }

    def _emit(self, *_args) -> None:
        self.ppl_stride.setEnabled(self.ppl_convention.currentData() == "sliding")
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    # state ------------------------------------------------------------------------------------
    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        if not busy:
            self.progress.setValue(0)

    def set_progress(self, fraction: float, message: str) -> None:
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
        if message:
            self.status.setText(message)

    def set_read_only(self, read_only: bool) -> None:
        for w in (self.model, self.kernels, self.layer, self.linear, self.layer_scheme,
                  self.schemes, self.measure_speed, self.decode_tokens, self.run_button):
            w.setEnabled(not read_only)
        self.cancel_button.setEnabled(False)

    def draw_layer(self, analysis, note: str = "") -> None:
        self.layer_panel.draw(analysis, note)

    def draw_runs(self, runs, note: str = "") -> None:
        self.model_panel.draw(runs, note)
