"""The "Trace…" control of the cluster, KV and endpoint labs' forms: a published trace run
instead of the seeded workload, with the options `--trace F --trace-format --window
--time-scale --sample` take on the command line (and for the KV lab `--length-scale` and
`--step-s`).

`TraceForm` owns the widgets and hands them out as (label, widget) rows (`rows()`) that the
cluster and endpoint labs put in their forms, or as one line (`line()`) that the KV lab puts
under its controls. Its value
is the labs' `trace` setting (engines/labs/batching/settings.py TraceSetting): None, or
{path, format, window, time_scale, sample, ...}; fields it does not show (the KV lab's sample
seed) are kept as `set_trace` gave them. It reads nothing: the lab reads the file in a worker.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from inferlab.engines.labs.kv.trace_scenario import STEP_S
from inferlab.engines.serve.traces.detect import FORMATS
from inferlab.engines.serve.traces.stream import MAX_SAMPLE
from inferlab.views.choices import select_choice
from inferlab.views.trace_view import TRACE_FILTER

NO_TRACE = "none: the seeded workload"
SHORT_LABELS = {"Trace format": "Format", "Window (s)": "Window", "Time scale": "Time ×",
                "Length scale": "Length ×"}
NAME_CHARS = 30  # a longer file name is shown with its middle elided: the form keeps its width
LINE_NAME_CHARS = 16  # the same in one line


class TraceForm(QObject):
    """The trace's file and options; `changed` when the user edits any of them (not when
    `set_trace` sets them). `lab_fields`: the KV lab's length scale and seconds per step;
    `none_text`: what the file's name says when there is no trace (what runs instead)."""

    changed = Signal()

    def __init__(self, lab_fields: bool = False, none_text: str = NO_TRACE, parent=None):
        super().__init__(parent)
        self.none_text = none_text
        self.options: QWidget | None = None  # the options' part of `line()`
        self._name_chars = NAME_CHARS
        self._quiet = False
        self._read_only = False
        self._path: str | None = None
        self._extra: dict = {}  # fields of the setting no widget shows
        self.choose_button = QPushButton("Trace…")
        self.choose_button.setToolTip(
            "Run a published trace (Mooncake, Bailian, Azure, BurstGPT, ShareGPT or InferLab "
            "JSONL) instead of the seeded workload; its block hash ids become shared prompt "
            "content")
        self.name = QLabel(none_text)
        self.clear_button = QPushButton("Clear trace")
        self.clear_button.setToolTip("Back to the seeded workload")
        self.buttons = QWidget()  # the two buttons, under the file's name in a form
        row = QHBoxLayout(self.buttons)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.choose_button)
        row.addWidget(self.clear_button)
        row.addStretch(1)
        self.format = QComboBox()
        self.format.addItem("from the file", None)
        for key in FORMATS:
            self.format.addItem(key, key)
        self.format.setToolTip("The trace's format (default: read from its first line)")
        self.window = QLineEdit()
        self.window.setPlaceholderText("all")
        self.window.setToolTip("START:END seconds after the trace's first arrival (either end "
                               "may be left out); empty: the whole trace")
        self.window.setMaximumWidth(110)
        self.time_scale = QDoubleSpinBox()
        self.time_scale.setRange(0.01, 1000.0)
        self.time_scale.setDecimals(2)
        self.time_scale.setValue(1.0)
        self.time_scale.setSuffix(" ×")
        self.time_scale.setToolTip("Inter-arrival times multiplied by this (2: half the rate)")
        self.sample = QSpinBox()
        self.sample.setRange(0, MAX_SAMPLE)  # 0 reads "all"
        self.sample.setSpecialValueText("all")
        self.sample.setToolTip("N of the window's requests, drawn uniformly (seeded); all: "
                               "every one")
        self._rows = [("Trace", self.name), ("", self.buttons), ("Trace format", self.format),
                      ("Window (s)", self.window), ("Time scale", self.time_scale),
                      ("Sample", self.sample)]
        self.length_scale = self.step_s = None
        if lab_fields:
            self.length_scale = QDoubleSpinBox()
            self.length_scale.setRange(0.000001, 1.0)
            self.length_scale.setDecimals(6)
            self.length_scale.setSingleStep(0.125)
            self.length_scale.setValue(1.0)
            self.length_scale.setToolTip("Input and output lengths and the trace's block "
                                         "size × this, so a production trace fits a small "
                                         "model (Mooncake on SmolLM2: 0.015625 = 1/64)")
            self.step_s = QDoubleSpinBox()
            self.step_s.setRange(0.001, 3600.0)
            self.step_s.setDecimals(3)
            self.step_s.setValue(STEP_S)
            self.step_s.setSuffix(" s")
            self.step_s.setToolTip("Seconds of the trace one lab step stands for")
            self._rows += [("Length scale", self.length_scale), ("Per step", self.step_s)]
        self.choose_button.clicked.connect(self.choose_file)
        self.clear_button.clicked.connect(self.clear)
        self.format.currentIndexChanged.connect(self._edited)
        self.window.editingFinished.connect(self._edited)
        for spin in (self.time_scale, self.sample, self.length_scale, self.step_s):
            if spin is not None:
                spin.editingFinished.connect(self._edited)
        self.set_trace(None)

    def rows(self) -> list[tuple[str, QWidget]]:
        """(label, widget) of each field for a form: the file's name, the Trace… and Clear
        trace buttons (no label), then the options (off while there is no trace)."""
        return list(self._rows)

    def line(self) -> QWidget:
        """The fields as one line that fits the 1280-pixel window: "Trace", the file's name
        (elided past LINE_NAME_CHARS), the buttons, then the options with short labels,
        shown only while there is a trace."""
        self._name_chars = LINE_NAME_CHARS
        self.format.setItemText(0, "auto")
        self.options = QWidget()
        options = QHBoxLayout(self.options)
        options.setContentsMargins(0, 0, 0, 0)
        for label, widget in self._rows[2:]:
            options.addWidget(QLabel(SHORT_LABELS.get(label, label)))
            options.addWidget(widget)
        widths = {self.format: 90, self.window: 75, self.time_scale: 70, self.sample: 80,
                  self.length_scale: 85, self.step_s: 75}  # spin boxes size for their maximum
        for widget, width in widths.items():
            if widget is not None:
                widget.setMaximumWidth(width)
        for button in (self.choose_button, self.clear_button):  # the style's least is wider
            button.setMaximumWidth(button.fontMetrics().horizontalAdvance(button.text()) + 20)
        line = QWidget()
        row = QHBoxLayout(line)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Trace"))
        row.addWidget(self.name)
        row.addWidget(self.buttons)
        row.addWidget(self.options)
        row.addStretch(1)
        self._enable()
        return line

    # ---- the value -------------------------------------------------------------------------
    def set_trace(self, trace: dict | None) -> None:
        """Show `trace` (a checked `trace` setting, or None: no trace, the options kept)."""
        self._quiet = True
        self._path = None if trace is None else trace["path"]
        self._show_name()
        if trace is not None:
            select_choice(self.format, trace.get("format"))
            self.window.setText(trace.get("window") or "")
            self.time_scale.setValue(float(trace.get("time_scale", 1.0)))
            self.sample.setValue(int(trace.get("sample") or 0))
            if self.length_scale is not None:
                self.length_scale.setValue(float(trace.get("length_scale", 1.0)))
                self.step_s.setValue(float(trace.get("step_s", STEP_S)))
            shown = {"path", "format", "window", "time_scale", "sample", "length_scale",
                     "step_s"}
            self._extra = {k: v for k, v in trace.items() if k not in shown}
        self._enable()
        self._quiet = False

    def trace(self) -> dict | None:
        """The `trace` setting the widgets say (unchecked: the lab checks it)."""
        if self._path is None:
            return None
        out = {"path": self._path, "format": self.format.currentData(),
               "window": self.window.text().strip() or None,
               "time_scale": self.time_scale.value(), "sample": self.sample.value() or None}
        if self.length_scale is not None:
            out |= {"length_scale": self.length_scale.value(), "step_s": self.step_s.value()}
        return self._extra | out

    def set_path(self, path: str | None) -> None:
        """The file chosen (tests set it here; the dialog calls it), as the user's edit."""
        self._path = path
        self._show_name()
        self._enable()
        self._edited()

    def choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.buttons, "Open a published trace", "",
                                              TRACE_FILTER)
        if path:
            self.set_path(path)

    def clear(self) -> None:
        if self._path is not None:
            self.set_path(None)

    def set_read_only(self, read_only: bool) -> None:
        self._read_only = read_only
        self._enable()

    # ---- inside ----------------------------------------------------------------------------
    def _show_name(self) -> None:
        """The file's name, its middle elided past NAME_CHARS (the whole path in the tip)."""
        name = self.none_text if self._path is None else Path(self._path).name
        if self._path is not None and len(name) > self._name_chars:
            half = (self._name_chars - 1) // 2
            name = f"{name[:half]}…{name[-half:]}"
        self.name.setText(name)
        self.name.setToolTip(self._path or "")

    def _enable(self) -> None:
        writable = not self._read_only
        self.choose_button.setEnabled(writable)
        self.clear_button.setEnabled(writable and self._path is not None)
        for _label, widget in self._rows[2:]:
            widget.setEnabled(writable and self._path is not None)
        if self.options is not None:
            self.options.setVisible(self._path is not None)

    def _edited(self, *_args) -> None:
        if not self._quiet:
            self.changed.emit()
