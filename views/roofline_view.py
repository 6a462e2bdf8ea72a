"""The roofline lab's view: controls, the plot, the formula with live values."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inferlab.views.formula_panel import FormulaPanel
from inferlab.views.roofline_plot import RooflinePlot

COMPUTE_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")
WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")


class RooflineView(QWidget):
    """Emits `settings_changed` and `measure_requested`; draws what it is given."""

    settings_changed = Signal(dict)
    measure_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        controls = QGroupBox("Roofs and operations")
        form = QFormLayout(controls)
        self.dtype = QComboBox()
        self.dtype.addItems(list(COMPUTE_DTYPES))
        self.dtype.setToolTip("Which peak the roofs use: the compute dtype of the operations")
        form.addRow("Compute dtype", self.dtype)
        self.presets = QListWidget()
        self.presets.setToolTip("Datasheet roofs to draw beside the measured one (dashed)")
        self.presets.setMinimumHeight(160)
        form.addRow(QLabel("Datasheet presets"))
        form.addRow(self.presets)
        self.model = QComboBox()
        self.model.setToolTip("Model whose prefill/decode steps are placed on the plot (predicted)")
        form.addRow("Model", self.model)
        self.context = QSpinBox()
        self.context.setRange(1, 1_000_000)
        self.context.setSingleStep(256)
        self.context.setSuffix(" tokens")
        self.context.setToolTip("Context length L for decode; prompt length for prefill")
        form.addRow("Context L", self.context)
        self.weight_dtype = QComboBox()
        self.weight_dtype.addItems(list(WEIGHT_DTYPES))
        form.addRow("Weight dtype", self.weight_dtype)
        self.kv_dtype = QComboBox()
        self.kv_dtype.addItems(list(WEIGHT_DTYPES))
        form.addRow("KV dtype", self.kv_dtype)
        self.measure_button = QPushButton("Measure roofs and operations")
        self.measure_button.setToolTip("Run the micro-benchmarks and real matmul / GEMV "
                                       "operations on the selected device (Ctrl+R)")
        self.measure_button.setShortcut("Ctrl+R")
        self.measure_button.clicked.connect(self.measure_requested)
        form.addRow(self.measure_button)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setStyleSheet("color: #555")
        form.addRow(self.status)
        controls.setMaximumWidth(300)

        self.plot = RooflinePlot()
        self.formula = FormulaPanel()
        self.formula.setMaximumWidth(330)
        layout = QHBoxLayout(self)
        layout.addWidget(controls)
        layout.addWidget(self.plot, 1)
        side = QVBoxLayout()
        side.addWidget(self.formula, 1)
        layout.addLayout(side)

        for combo in (self.dtype, self.model, self.weight_dtype, self.kv_dtype):
            combo.currentIndexChanged.connect(self._emit)
        self.context.valueChanged.connect(self._emit)
        self.presets.itemChanged.connect(self._emit)

    def set_choices(self, presets: list[tuple[str, str]], models: list[tuple[str, str]]) -> None:
        self._quiet = True
        self.presets.clear()
        for key, label in presets:
            item = QListWidgetItem(label)
            item.setData(Qt.UserRole, key)
            item.setFlags(item.flags() | Qt.ItemIsUserCheckable)
            item.setCheckState(Qt.Unchecked)
            self.presets.addItem(item)
        self.model.clear()
        for key, label in models:
            self.model.addItem(label, key)
        self._quiet = False

    def set_settings(self, s: dict) -> None:
        self._quiet = True
        for combo, key in ((self.dtype, "dtype"), (self.weight_dtype, "weight_dtype"),
                           (self.kv_dtype, "kv_dtype")):
            index = combo.findText(str(s.get(key)))
            if index >= 0:
                combo.setCurrentIndex(index)
        index = self.model.findData(s.get("model"))
        if index >= 0:
            self.model.setCurrentIndex(index)
        self.context.setValue(int(s.get("context", 1024)))
        chosen = set(s.get("presets", []))
        for row in range(self.presets.count()):
            item = self.presets.item(row)
            item.setCheckState(Qt.Checked if item.data(Qt.UserRole) in chosen else Qt.Unchecked)
        self._quiet = False

    def settings(self) -> dict:
        chosen = [self.presets.item(r).data(Qt.UserRole) for r in range(self.presets.count())
                  if self.presets.item(r).checkState() == Qt.Checked]
        return {"dtype": self.dtype.currentText(), "presets": chosen,
                "model": self.model.currentData(), "context": self.context.value(),
                "weight_dtype": self.weight_dtype.currentText(),
                "kv_dtype": self.kv_dtype.currentText()}

    def set_busy(self, busy: bool, message: str = "") -> None:
        self.measure_button.setEnabled(not busy)
        self.status.setText(message)

    def set_read_only(self, read_only: bool) -> None:
        for w in (self.dtype, self.presets, self.model, self.context, self.weight_dtype,
                  self.kv_dtype, self.measure_button):
            w.setEnabled(not read_only)

    def _emit(self, *_args) -> None:
        if not self._quiet:
            self.settings_changed.emit(self.settings())
