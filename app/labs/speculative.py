"""Speculative decoding lab: one prompt decoded by a drafter and the target, one draft-verify
step (draft K, or a token tree of several candidates; ONE target forward; roll back) a step,
drawn as the token stream coloured by fate beside the acceptance statistics and the theory.
Its Training tab shows the draft head the EAGLE drafter reads and trains new ones
(app/labs/speculative_training.py).

A stepped lab (`SteppedLab`): the session (engines/labs/speculative/session.py) lives in worker
tasks only; each step's frozen `SpeculativeStep` comes back through a queued signal; the view
is redrawn at most at the screen rate. The header drawn beside the records is a
`SpeculativeHeader` (model, drafter, K, the prompt, the text of every token seen).
"""

from __future__ import annotations

from PySide6.QtWidgets import QTabWidget

from inferlab.app.labs.speculative_training import HeadTraining
from inferlab.app.labs.stepped import SteppedLab
from inferlab.engines.fields import clean_settings
from inferlab.engines.labs.speculative.records import SpeculativeSnapshot
from inferlab.engines.labs.speculative.section import speculative_section
from inferlab.engines.labs.speculative.session import speculative_session
from inferlab.engines.labs.speculative.settings import (
    SPECULATIVE_SETTINGS,
    TREE_DRAFTERS,
    parse_drafter,
    speculative_defaults,
)
from inferlab.engines.labs.speculative.sweep import DEFAULT_KS, k_sweep
from inferlab.engines.labs.speculative.trace import speculative_trace_step
from inferlab.views.speculative_training import TrainingPanel
from inferlab.views.speculative_view import SpeculativeView

AUTO_STEPS = 12
"""Steps run when the lab is first shown: a few lines of coloured tokens to look at."""


def _width_text(width: int) -> str:
    return f", token trees of width {width}" if width > 1 else ""


class SpeculativeLab(SteppedLab):
    lab_id = "speculative"
    task_name = "Speculative lab"
    defaults = speculative_defaults()
    settings_table = SPECULATIVE_SETTINGS
    auto_steps = AUTO_STEPS
    empty_snapshot_text = ("This snapshot holds no speculative run.",
                           "Read-only snapshot: the speculative lab had not run when it was "
                           "taken.")

    def __init__(self, context, parent=None):
        super().__init__(context, SpeculativeView(), parent)
        self._trace_at_s = 0.0
        self.sweep = None
        self._sweep_task = None
        self.view.set_settings(self._settings)
        self.view.set_status("The lab loads its model when it is first shown.")
        self.view.sweep_panel.sweep_requested.connect(self.run_sweep)
        self.view.sweep_panel.cancel_requested.connect(self.cancel_sweep)
        self.training = HeadTraining(self, TrainingPanel(), self)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.view, "Decode")
        self.tabs.addTab(self.training.panel, "Training")
        self.tabs.currentChanged.connect(self._tab_changed)
        self.widget = self.tabs

    # ---- the Training tab --------------------------------------------------------------------
    def _tab_changed(self, _index: int) -> None:
        if self.tabs.currentWidget() is self.training.panel:
            self.training.show_head()  # its model's heads, looked up when first shown

    def on_settings_changed(self, changed: set) -> None:
        super().on_settings_changed(changed)
        if self.tabs.currentWidget() is self.training.panel:
            self.training.show_head()

    # ---- the K sweep -------------------------------------------------------------------------
    def run_sweep(self) -> None:
        """Speedup against K for the current settings, in a worker (progress, cancel)."""
        if self._sweep_task is not None or self.read_only:
            return
        settings, device = self.settings(), self.context.device_id
        panel = self.view.sweep_panel
        panel.set_busy(True)
        panel.set_note(f"Sweeping K = {', '.join(map(str, DEFAULT_KS))}…")

        def work(progress, should_stop):
            return k_sweep(settings, DEFAULT_KS, device, progress, should_stop)

        def done(sweep) -> None:
            self.sweep = sweep
            panel.draw(sweep)

        def failed(message: str) -> None:
            panel.set_note(f"The sweep failed: {message}")

        def ended() -> None:
            task, self._sweep_task = self._sweep_task, None
            panel.set_busy(False, self.read_only)
            if task is not None and task.should_stop():
                panel.set_note("Sweep cancelled.")

        self._sweep_task = self.run_task("Speculative lab: sweep K", work, done, failed,
                                         on_end=ended)
        self._sweep_task.progress.connect(lambda f, m: panel.set_note(m))

    def cancel_sweep(self) -> None:
        if self._sweep_task is not None:
            self._sweep_task.stop()

    # ---- settings ----------------------------------------------------------------------------
    def valid_settings(self, s: dict) -> dict:
        """Fields of a form the view never makes (a hand-edited settings file) get their
        defaults back; an empty prompt stays, and opening the session says what is wrong."""
        s = clean_settings(s, self.settings_table, self.defaults)
        try:
            parse_drafter(s["drafter"])
        except ValueError:
            s["drafter"] = self.defaults["drafter"]
        if s["drafter"] not in TREE_DRAFTERS:  # token trees: n-gram or EAGLE candidates
            s["tree_width"] = 1
        if not s["top_p"] > 0:
            s["top_p"] = self.defaults["top_p"]
        if not s["model"].strip():
            s["model"] = self.defaults["model"]
        return s

    # ---- the session -------------------------------------------------------------------------
    def preparing_text(self, settings: dict, device: str) -> str:
        return (f"Loading {settings['model']} on {device} with the {settings['drafter']} "
                f"drafter, K = {settings['k']}{_width_text(settings.get('tree_width', 1))}…")

    def open_session(self, settings: dict, device: str, progress):
        progress(0.1, "loading the models")
        session = speculative_session(settings, device)
        self._trace_at_s = self.context.recorder.now_s()
        return session

    def header_of(self, session):
        return session.header()

    def ready_text(self) -> str:
        s = self.session
        if s is None or self.header is None:
            return ""
        h = self.header
        mode = ("greedy" if s.settings["temperature"] == 0
                else f"T = {s.settings['temperature']:g}, top-p = {s.settings['top_p']:g}")
        where = (f"{h.model} on {s.device}, {h.drafter} drafter, K = {h.k}"
                 f"{_width_text(h.tree_width)}, {mode}")
        emitted = sum(len(r.token_ids) for r in self.records)
        note = f" {s.note}" if s.note else ""
        if s.done:
            return (f"{where}: {emitted} tokens in {len(self.records)} target forwards "
                    f"({s.run().finish_reason}). Reset (Ctrl+R) to decode it again.{note}")
        return (f"{where}: {emitted} of {s.settings['max_tokens']} tokens after "
                f"{len(self.records)} target forwards. Step (N) runs one draft-verify step, "
                f"Run (Space) runs to the end, Ctrl+R resets.{note}")

    def ended_text(self) -> str:
        return "The output is complete: Reset (Ctrl+R) to decode it again."

    # ---- records ------------------------------------------------------------------------------
    def on_record(self, record) -> None:
        recorder = self.context.recorder
        start = max(self._trace_at_s,
                    recorder.now_s() - record.draft_s - record.target_forward_s)
        self._trace_at_s = speculative_trace_step(recorder, record, start)

    def draw(self, header, records) -> None:
        self.view.draw(header, records)

    # ---- snapshots ------------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        return speculative_section(self.settings(), self.header, self.records, self.sweep)

    def replay_parts(self, record: SpeculativeSnapshot):
        self.view.sweep_panel.draw(record.sweep)
        return record.settings, record.header, list(record.steps)

    def show_snapshot(self, record) -> None:
        super().show_snapshot(record)
        self.training.set_read_only(True)

    def show_live(self) -> None:
        super().show_live()
        self.view.sweep_panel.draw(self.sweep)
        self.training.set_read_only(False)

    def replay_text(self, header, records) -> str:
        emitted = sum(len(r.token_ids) for r in records)
        return (f"Read-only snapshot: {header.model}, {header.drafter} drafter, K = {header.k}"
                f"{_width_text(header.tree_width)}: {emitted} tokens in {len(records)} steps. Drag the step slider to replay "
                "them.")
