"""The view side of a stepped lab (`app/labs/stepped.py`): the signals the lab listens to,
its Run button toggling to Pause, Step off while a run goes or in a snapshot, and one status
line (red for errors, hidden when empty).

A view subclasses `SteppedView` and builds `status`; `step_buttons` builds `reset_button`,
`step_button` and `run_button` wired to the signals; `step_shortcuts` adds their keys (Space,
N, Ctrl+R); `replay_slider_row` builds the slider that shows an earlier step (it calls
`_on_slider`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSlider, QWidget


class SteppedView(QWidget):
    settings_changed = Signal(dict)
    step_requested = Signal()
    run_toggled = Signal()
    reset_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.read_only = False

    def set_running(self, running: bool) -> None:
        self.run_button.setText("Pause" if running else "Run")
        self.step_button.setEnabled(not running and not self.read_only)

    def set_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #B71C1C" if error else "color: #555")
        self.status.setText(text)
        self.status.setVisible(bool(text))

    def step_buttons(self, reset_tip: str, step_tip: str, run_tip: str) -> None:
        """Reset, Step and Run with their tooltips, clicks emitting the lab's signals."""
        self.reset_button = QPushButton("Reset")
        self.reset_button.setToolTip(reset_tip)
        self.step_button = QPushButton("Step")
        self.step_button.setToolTip(step_tip)
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip(run_tip)
        self.reset_button.clicked.connect(self.reset_requested)
        self.step_button.clicked.connect(self.step_requested)
        self.run_button.clicked.connect(self.run_toggled)

    def step_shortcuts(self) -> None:
        """Space runs or pauses, N steps, Ctrl+R resets, while the focus is in this view."""
        for keys, slot in (("Space", self.run_toggled.emit), ("N", self.step_requested.emit),
                           ("Ctrl+R", self.reset_requested.emit)):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)

    def replay_slider_row(self, unit: str, tip: str, label_width: int) -> QHBoxLayout:
        """"Show <unit>" [slider] "<unit> —": sets `slider` and `step_label`; a moved slider
        calls `self._on_slider(value)`."""
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setToolTip(tip)
        self.slider.setRange(0, 0)
        self.slider.valueChanged.connect(self._on_slider)
        self.step_label = QLabel(f"{unit} —")
        self.step_label.setMinimumWidth(label_width)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel(f"Show {unit}"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.step_label)
        return row
