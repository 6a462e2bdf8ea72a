"""The lab contract: one controller per lab id, owning its view and its engine calls."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget


class Lab(QObject):
    """A lab: a view plus the engine work behind it.

    Subclasses set `lab_id`, `title`, `summary` and build `self.widget`. Engine work goes
    through `context.run_task` so it never blocks the window. A lab can show a snapshot
    read-only (`show_snapshot`) and go back to live data (`show_live`).
    """

    lab_id = ""
    title = ""
    summary = ""
    shortcut_index = 0

    def __init__(self, context, parent=None):
        super().__init__(parent)
        self.context = context
        self.widget: QWidget = QWidget()
        self.read_only = False

    # life cycle ---------------------------------------------------------------------------
    def activated(self) -> None:
        """Called each time the lab becomes visible: start default work lazily here."""

    def shutdown(self) -> None:
        """Stop timers and threads before the window closes."""

    # snapshots ------------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        """{"settings": ..., "state": ..., "metrics": ...} for the snapshot file."""
        return {"settings": self.settings(), "state": {}, "metrics": {}}

    def check_section(self, section: dict) -> None:
        """Raise ValueError naming the bad field if `show_snapshot` could not draw it."""

    def show_snapshot(self, section: dict) -> None:
        """Draw a snapshot's section read-only. Raise ValueError naming a bad field."""
        self.read_only = True

    def show_live(self) -> None:
        self.read_only = False

    # remembered settings ----------------------------------------------------------------------
    def settings(self) -> dict:
        return {}

    def save_settings(self) -> None:
        import json

        self.context.settings.setValue(f"labs/{self.lab_id}", json.dumps(self.settings()))

    def saved_settings(self) -> dict:
        import json

        raw = self.context.settings.value(f"labs/{self.lab_id}", "")
        try:
            value = json.loads(raw) if raw else {}
        except (TypeError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    # export -------------------------------------------------------------------------------
    def export_widget(self) -> QWidget:
        """The widget File ▸ Export view renders."""
        return self.widget
