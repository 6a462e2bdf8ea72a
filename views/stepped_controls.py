"""What every stepped lab's view shares: its Run button toggles to Pause, Step is off while a
run goes or in a snapshot, and one status line (red for errors, hidden when empty).

A mixin: the view builds `run_button`, `step_button`, `status` and sets `read_only`.
"""

from __future__ import annotations


class SteppedControls:
    def set_running(self, running: bool) -> None:
        self.run_button.setText("Pause" if running else "Run")
        self.step_button.setEnabled(not running and not self.read_only)

    def set_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #B71C1C" if error else "color: #555")
        self.status.setText(text)
        self.status.setVisible(bool(text))
