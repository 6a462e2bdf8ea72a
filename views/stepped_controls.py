"""The controls of a stepped lab (`app/labs/stepped.py`), once for all of them (attention, KV,
batching, speculative): Reset, Step and Run buttons with their keys (Space runs or pauses, N
steps, Ctrl+R resets, while the focus is in the view), Run toggling to Pause, Step off while a
run goes or in a snapshot, one status line (red for errors, hidden when empty), and the replay
slider with its label that shows an earlier step.

A view subclasses `SteppedView`, calls `build_controls` and places the widgets it made
(`buttons`, `status`, `slider_row`) where its layout wants them. Its `draw` calls
`follow(n_steps, index)` for the step to show and implements `show_step(index)`, which the
slider calls too; `clear_steps()` empties the slider. A view with its own inputs extends
`set_read_only`. The lab has no speed control in the view: `SteppedLab.set_speed` is set from
code only.
"""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QSlider, QWidget

SHORTCUTS = (("Space", "run_toggled"), ("N", "step_requested"), ("Ctrl+R", "reset_requested"))
"""The keys of the three buttons, and the signal each emits."""


class SteppedView(QWidget):
    """The signals a stepped lab listens to and the controls that emit them."""

    settings_changed = Signal(dict)
    step_requested = Signal()
    run_toggled = Signal()
    reset_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.read_only = False
        self.index = -1  # the step shown (-1: none)
        self._drawn = 0  # steps at the last draw (a live list may grow in place)
        self._unit = "step"

    def build_controls(self, unit: str, reset_tip: str, step_tip: str, run_tip: str,
                       slider_tip: str, label_width: int) -> None:
        """Make `reset_button`, `step_button`, `run_button` (also as `buttons`), their keys,
        `status`, and `slider_row`: "Show <unit>" [`slider`] `step_label` ("<unit> —" until a
        step is shown, at least `label_width` pixels wide)."""
        self._unit = unit
        self.reset_button = QPushButton("Reset")
        self.reset_button.setToolTip(reset_tip)
        self.step_button = QPushButton("Step")
        self.step_button.setToolTip(step_tip)
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip(run_tip)
        self.buttons = (self.reset_button, self.step_button, self.run_button)
        for button, signal in zip(self.buttons, (self.reset_requested, self.step_requested,
                                                 self.run_toggled), strict=True):
            button.clicked.connect(signal)
            button.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
            button.setMinimumWidth(40)
        for keys, signal in SHORTCUTS:
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.WidgetWithChildrenShortcut)
            shortcut.activated.connect(getattr(self, signal).emit)

        self.status = QLabel()
        self.status.setWordWrap(True)

        self.slider = QSlider(Qt.Horizontal)
        self.slider.setToolTip(slider_tip)
        self.slider.setRange(0, 0)
        self.slider.valueChanged.connect(self._on_slider)
        self.step_label = QLabel(f"{unit} —")
        self.step_label.setMinimumWidth(label_width)
        self.slider_row = QHBoxLayout()
        self.slider_row.setContentsMargins(0, 0, 0, 0)
        self.slider_row.addWidget(QLabel(f"Show {unit}"))
        self.slider_row.addWidget(self.slider, 1)
        self.slider_row.addWidget(self.step_label)
        self.set_running(False)

    def control_row(self, fields) -> QHBoxLayout:
        """The lab's top row: each (label, widget, stretch) of `fields` (no label where it is
        ""), then the Reset / Step / Run buttons (build_controls makes them first)."""
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for label, widget, stretch in fields:
            if label:
                row.addWidget(QLabel(label))
            row.addWidget(widget, stretch)
        row.addSpacing(8)
        for button in self.buttons:
            row.addWidget(button)
        return row

    # ---- the lab's calls ---------------------------------------------------------------------
    def set_running(self, running: bool) -> None:
        self.run_button.setText("Pause" if running else "Run")
        self.step_button.setEnabled(not running and not self.read_only)

    def set_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #B71C1C" if error else "color: #555")
        self.status.setText(text)
        self.status.setVisible(bool(text))

    def set_read_only(self, read_only: bool) -> None:
        """A snapshot's replay: the buttons off, the slider still on. A view extends it for
        its own inputs."""
        self.read_only = read_only
        for button in self.buttons:
            button.setEnabled(not read_only)

    # ---- the replay slider -------------------------------------------------------------------
    def follow(self, n_steps: int, index: int | None = None) -> int:
        """`n_steps` are drawn now: the step to show, `index` if given, else the latest when
        the slider was at the latest (or nothing was shown), else where it was. The slider is
        moved there without calling `show_step`."""
        following = self.index < 0 or self.index >= self._drawn - 1
        self._drawn = n_steps
        if index is None:
            index = n_steps - 1 if following else min(self.index, n_steps - 1)
        self.index = index
        with QSignalBlocker(self.slider):
            self.slider.setRange(0, max(n_steps - 1, 0))
            self.slider.setValue(max(index, 0))
        return index

    def clear_steps(self) -> None:
        """No step drawn: the slider empty, its label "<unit> —"."""
        self.index, self._drawn = -1, 0
        with QSignalBlocker(self.slider):
            self.slider.setRange(0, 0)
        self.step_label.setText(f"{self._unit} —")

    def show_step(self, index: int) -> None:
        """Draw step `index` of the steps last drawn (the view's own)."""
        raise NotImplementedError

    def _on_slider(self, value: int) -> None:
        if self._drawn:
            self.index = value
            self.show_step(value)
