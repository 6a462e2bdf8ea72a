"""The lab contract: one controller per lab id, owning its view and its engine calls."""

from __future__ import annotations

import json

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from inferlab.app.labs.registry import lab_spec, resolve


class Lab(QObject):
    """A lab: a view plus the engine work behind it.

    Subclasses set `lab_id` (its title and summary come from its registry entry) and build
    `self.widget`. Engine work goes through `run_task` so it never blocks the window and
    `busy()` knows of it. A lab can show a snapshot read-only (`show_snapshot`) and go back
    to live data (`show_live`).
    """

    lab_id = ""
    needs_devices = True
    """False: the window may build this lab before the device list is known (start-up)."""

    def __init__(self, context, parent=None):
        super().__init__(parent)
        self.context = context
        self.widget: QWidget = QWidget()
        self.read_only = False
        self._lab_tasks: list = []

    @property
    def spec(self):
        return lab_spec(self.lab_id)

    @property
    def title(self) -> str:
        return self.spec.title

    @property
    def summary(self) -> str:
        return self.spec.summary

    # background work --------------------------------------------------------------------------
    def run_task(self, name: str, work, on_result=None, on_error=None, on_end=None):
        """Run `work(progress, should_stop)` in a worker (`AppContext.run_task`); `on_end()`
        after the result (or error, or cancel) has been delivered. The lab is `busy()` until
        then."""
        made = []

        def ended() -> None:
            if made and made[0] in self._lab_tasks:
                self._lab_tasks.remove(made[0])
            if on_end is not None:
                on_end()

        # `ended` goes in before the thread starts: a quick task could otherwise finish
        # before it is connected, and the lab would read busy for ever.
        task = self.context.run_task(name, work, on_result, on_error, on_done=ended)
        made.append(task)
        self._lab_tasks.append(task)
        return task

    def busy(self) -> bool:
        """True while work this lab started runs or its result has not reached the window."""
        return bool(self._lab_tasks)

    # life cycle ---------------------------------------------------------------------------
    def activated(self) -> None:
        """Called each time the lab becomes visible: start default work lazily here."""

    def shutdown(self) -> None:
        """Stop timers and threads before the window closes."""

    # snapshots ------------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        """{"settings": ..., "state": ..., "metrics": ...} for the snapshot file."""
        return {"settings": self.settings(), "state": {}, "metrics": {}}

    def read_section(self, section: dict):
        """The lab's snapshot record of `section`: its registry reader, strict (ValueError
        names the bad field). `show_snapshot`, a comparison's plots and a report's formulas
        all take this record."""
        return resolve(self.spec.read_section)(section)

    def show_snapshot(self, record) -> None:
        """Draw a snapshot's section read-only: `record` is what the lab's registry reader
        (`read_section`) made of it. Raise ValueError naming a bad field."""
        self.read_only = True

    def show_live(self) -> None:
        self.read_only = False

    # remembered settings ----------------------------------------------------------------------
    def settings(self) -> dict:
        return {}

    def save_settings(self) -> None:
        self.context.settings.setValue(f"labs/{self.lab_id}", json.dumps(self.settings()))

    def saved_settings(self) -> dict:
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
