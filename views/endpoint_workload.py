"""What the endpoint lab sends, chosen in one place: the seeded workload, InferLab's JSONL or
a published trace (Mooncake, Bailian, Azure, BurstGPT, ShareGPT), through the Trace… control
the cluster and KV labs have (views/trace_form.py).

The lab's settings are flat (engines/labs/endpoint/settings.py), so `WorkloadSource` maps the
form's value onto them: a file chosen here is `trace_file` with `trace_format`,
`trace_window`, `trace_time_scale` and `trace_sample`, as `run endpoint --trace` sets them (the
published-trace reader reads InferLab's JSONL as well, and gives it the window and time scale).
A `workload_file` (`run endpoint --workload`'s snapshot, or settings saved before the lab had a
Trace… control) shows in the same place as an InferLab JSONL and stays a `workload_file`, read
as it always was, until the user edits it here; from then on it is a trace like any other.

The trace's options are rows of the lab's form shown only while a file is chosen, as the KV
lab's trace line shows them: the seeded workload's form stays as short as it was.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFormLayout

from inferlab.engines.labs.endpoint.settings import ENDPOINT_DEFAULTS
from inferlab.views.trace_form import TraceForm

SOURCE_KEYS = ("workload_file", "trace_file", "trace_format", "trace_window",
               "trace_time_scale", "trace_sample")


class WorkloadSource(QObject):
    """The form's rows (`add_rows`) and the settings they say (`settings()`); `changed` when
    the user edits them (not when `set_settings` sets them)."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.form = TraceForm(parent=self)
        self.form.choose_button.setToolTip(
            "Send a trace instead of the seeded workload: a published one (Mooncake, Bailian, "
            "Azure, BurstGPT, ShareGPT; block hash ids become shared prompt text) or "
            "InferLab's JSONL, at its arrival times")
        self._workload_file = ""  # the settings' JSONL, kept until the user edits the form
        self._layout: QFormLayout | None = None
        self.form.changed.connect(self._edited)

    def add_rows(self, layout: QFormLayout) -> None:
        """The file's name, Trace… and Clear trace, then the options (while a file is
        chosen), as rows of `layout`."""
        self._layout = layout
        for label, widget in self.form.rows():
            layout.addRow(label, widget)
        self._show_options()

    def is_set(self) -> bool:
        """True while a file is chosen (the seeded workload's rate means nothing then)."""
        return self.form.trace() is not None

    def set_settings(self, s: dict) -> None:
        self._workload_file = s["workload_file"]
        if self._workload_file:
            trace = {"path": self._workload_file, "format": "inferlab"}
        elif s["trace_file"]:
            trace = {"path": s["trace_file"], "format": s["trace_format"] or None,
                     "window": s["trace_window"] or None,
                     "time_scale": s["trace_time_scale"], "sample": s["trace_sample"] or None}
        else:
            trace = None
        self.form.set_trace(trace)
        self._show_options()

    def settings(self) -> dict:
        """The six SOURCE_KEYS settings; those of no file at their defaults."""
        out = {key: ENDPOINT_DEFAULTS[key] for key in SOURCE_KEYS}
        trace = self.form.trace()
        if trace is None:
            return out
        if self._workload_file:
            return out | {"workload_file": self._workload_file}
        return out | {"trace_file": trace["path"], "trace_format": trace["format"] or "",
                      "trace_window": trace["window"] or "",
                      "trace_time_scale": trace["time_scale"],
                      "trace_sample": trace["sample"] or 0}

    def set_read_only(self, read_only: bool) -> None:
        self.form.set_read_only(read_only)

    def _show_options(self) -> None:
        if self._layout is not None:
            for _label, widget in self.form.rows()[2:]:
                self._layout.setRowVisible(widget, self.is_set())

    def _edited(self) -> None:
        self._workload_file = ""
        self._show_options()
        self.changed.emit()
