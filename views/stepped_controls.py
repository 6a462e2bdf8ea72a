"""The view side of a stepped lab (`app/labs/stepped.py`): the signals the lab listens to,
its Run button toggling to Pause, Step off while a run goes or in a snapshot, and one status
line (red for errors, hidden when empty).

A view subclasses `SteppedView` and builds `run_button`, `step_button` and `status`.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget


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
