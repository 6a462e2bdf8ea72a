"""The base of labs that step an engine: the KV lab, and the batching and speculative labs.

An engine session is opened and stepped in worker tasks only, one task at a time: prepare
(open the session, run a few steps), one step, or run until the end, a pause or a stop. Each
step's frozen record comes back through a queued signal and is appended to `records`; the
view is redrawn at most at the screen rate (`DRAW_INTERVAL_MS`), never once per step. A
speed limit (`set_speed`) paces a run for watching. Long histories are thinned as they grow
(`thin_history`, with `engines.trace.thinning.keep_every`), and a snapshot's records replay
read-only through the same `draw`, the view's step slider choosing the step.

A subclass sets `lab_id`, builds its view and passes it to `__init__`, and provides:

    open_session(settings, device, progress) -> session   in a worker: load, prepare
    header_of(session) -> header      in a worker: what is drawn beside the records
    draw(header, records)             draw them (the view)
    replay_parts(record) -> (settings, header or None, records)   from the lab's snapshot record
    ready_text() -> str               the status line between steps
    on_record(record)                 optional: trace spans, counters (GUI thread)
    thin_history()                    optional: drop detail from old records
    valid_settings(settings) -> dict  optional: the inputs checked (saved ones, the view's)

The session has `step() -> record`, `done` and `step_index` (steps taken). The view is a
`views.stepped_controls.SteppedView` (its signals, `set_status`, `set_running`) that also has
`set_settings`, `set_read_only`, `clear(message)` and a `step_button`.
"""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QTimer, Signal

from inferlab.app.labs.base import Lab
from inferlab.engines.fields import clean_settings

DRAW_INTERVAL_MS = 33  # the screen rate: records arriving faster are drawn together


class SteppedLab(Lab):
    step_done = Signal(int, object, object)  # generation, header, record
    session_ready = Signal(int, object)  # generation, header

    auto_steps = 6
    """Steps run when the lab is first shown, so it opens on something to look at."""
    defaults: dict = {}
    settings_table: dict = {}  # field -> engines.fields.Setting: remembered settings are cleaned
    task_name = ""
    empty_snapshot_text = ("This snapshot holds no run of this lab.",
                           "Read-only snapshot: the lab had not run when it was taken.")
    """How its tasks are named in the status bar ("KV lab: step"); the title by default."""

    def __init__(self, context, view, parent=None):
        super().__init__(context, parent)
        self.view = view
        self.widget = view
        self.session = None
        self.header = None
        self.records: list = []
        self.steps_per_s: float | None = None  # None: as fast as the engine goes
        self._generation = 0
        self._task = None
        self._running = False
        self._pause = threading.Event()
        self._after_task = None  # what to start once the current task has ended
        self._dirty = False
        self._settings = self.valid_settings(
            clean_settings(self.saved_settings(), self.settings_table, self.defaults))
        view.step_requested.connect(self.step)
        view.run_toggled.connect(self.toggle_run)
        view.reset_requested.connect(lambda: self.reset())
        view.settings_changed.connect(self._on_settings)
        self.step_done.connect(self._on_step_done)
        self.session_ready.connect(self._on_session_ready)
        context.device_changed.connect(self._on_device_changed)
        self._timer = QTimer(self)
        self._timer.setInterval(DRAW_INTERVAL_MS)
        self._timer.timeout.connect(self._draw_if_dirty)
        self._timer.start()

    # ---- what a subclass provides -------------------------------------------------------------
    def open_session(self, settings: dict, device: str, progress):
        raise NotImplementedError

    def header_of(self, session):
        raise NotImplementedError

    def draw(self, header, records) -> None:
        raise NotImplementedError

    def replay_parts(self, record):
        """(settings, header or None, records) of the lab's snapshot record (what its registry
        reader made of the section)."""
        raise NotImplementedError

    def ready_text(self) -> str:
        return ""

    def on_record(self, record) -> None:
        """A record arrived (GUI thread): add it to the session trace, say."""

    def thin_history(self) -> None:
        """Drop detail from older records so a long run's memory stays bounded."""

    def valid_settings(self, settings: dict) -> dict:
        return settings

    # ---- settings -------------------------------------------------------------------------------
    def settings(self) -> dict:
        return dict(self._settings)

    def _on_settings(self, settings: dict) -> None:
        if self.read_only:
            return
        changed = {k for k in settings if settings[k] != self._settings.get(k)}
        if not changed:
            return
        self._settings = self.valid_settings(dict(self._settings) | settings)
        self.on_settings_changed(changed)

    def on_settings_changed(self, changed: set) -> None:
        """The user changed `changed` settings: start again from step 0."""
        self.reset()

    def _on_device_changed(self, _device_id: str) -> None:
        """The engine runs on the chosen device: start the session again there."""
        if self.session is not None and not self.read_only:
            self.reset()

    def set_speed(self, steps_per_s: float | None) -> None:
        """Pace runs at most this many steps a second (None or 0: no limit)."""
        self.steps_per_s = steps_per_s if steps_per_s and steps_per_s > 0 else None

    # ---- work ------------------------------------------------------------------------------------
    def activated(self) -> None:
        if self.session is None and self._task is None and not self.read_only:
            self.reset(auto_steps=self.auto_steps, first=True)

    def reset(self, auto_steps: int = 1, run: bool = False, first: bool = False) -> None:
        """Open a new session with the settings, run `auto_steps` steps (then all if `run`).
        `first`: the lab's first opening (`prepared` may select something to show)."""
        if self.read_only:
            return
        if self._task is not None:
            self._after_task = lambda: self.reset(auto_steps, run, first)
            self._pause.set()
            self._task.stop()
            return
        self._generation += 1
        gen = self._generation
        settings = dict(self._settings)
        device = self.context.device_id
        self.session, self.header, self.records = None, None, []
        self.view.clear("Preparing…")
        self.view.set_status(self.preparing_text(settings, device))

        def work(progress, should_stop):
            session = self.open_session(settings, device, progress)
            self.session_ready.emit(gen, self.header_of(session))
            for i in range(auto_steps):
                if session.done or should_stop():
                    break
                self._step_once(gen, session)
                progress(0.5 + 0.5 * (i + 1) / auto_steps, f"step {session.step_index}")
            return gen, session

        def ready(result) -> None:
            got_gen, session = result
            if got_gen == self._generation:
                self.session = session
                self.flush()
                self.prepared(first)
                self.view.set_status(self.ready_text())
                if run:
                    self._after_task = self.toggle_run

        self._start(f"{self._name()}: prepare", work, ready)

    def preparing_text(self, settings: dict, device: str) -> str:
        return f"Preparing on {device}…"

    def prepared(self, first: bool) -> None:
        """The session is ready and its first steps drawn (GUI thread)."""

    def _step_once(self, gen: int, session) -> None:
        """In a worker: one step, its record sent to the GUI thread."""
        record = session.step()
        self.step_done.emit(gen, self.header_of(session), record)

    def ended_text(self) -> str:
        return "The run has ended: Reset (Ctrl+R) to run it again."

    def _name(self) -> str:
        return self.task_name or self.title

    def step(self) -> None:
        if self.read_only or self._task is not None:
            return
        session, gen = self.session, self._generation
        if session is None:
            self.reset()
            return
        if session.done:
            self.view.set_status(self.ended_text())
            return

        def work(progress, should_stop):
            self._step_once(gen, session)

        self._start(f"{self._name()}: step", work, lambda _r: self.view.set_status(self.ready_text()))

    def toggle_run(self) -> None:
        """Run to the end, or pause a run (it stops after the step in progress)."""
        if self.read_only:
            return
        if self._running:
            self._pause.set()
            return
        if self._task is not None:
            self._after_task = self.toggle_run  # run once the current work ends
            return
        session, gen = self.session, self._generation
        if session is None:
            self.reset(run=True)
            return
        if session.done:
            self.view.set_status(self.ended_text())
            return
        self._pause.clear()
        self._running = True
        self.view.set_running(True)

        def work(progress, should_stop):
            while not session.done and not self._pause.is_set() and not should_stop():
                started = time.perf_counter()
                self._step_once(gen, session)
                n = session.step_index
                progress(min(0.99, n / max(n + 10, 1)), f"step {n}")
                if self.steps_per_s:
                    self._pause.wait(max(0.0, 1 / self.steps_per_s - (time.perf_counter() - started)))

        def ended(_r=None) -> None:
            self._running = False
            self.view.set_running(False)
            self.view.set_status(self.ready_text())

        self._start(f"{self._name()}: run", work, ended, on_end=ended)

    def _start(self, name: str, work, on_result, on_end=None) -> None:
        def done() -> None:
            self._task = None
            if on_end is not None:
                on_end()
            if not self._running and not self.read_only:
                self.view.set_running(False)
            follow, self._after_task = self._after_task, None
            if follow is not None and not self.read_only:
                follow()

        self._task = self.run_task(name, work, on_result, self._on_error, on_end=done)
        self.view.step_button.setEnabled(False)

    def _on_error(self, message: str) -> None:
        self.view.set_status(f"{self._name()}: {message}", error=True)

    # ---- records arriving ---------------------------------------------------------------------------
    def _on_session_ready(self, gen: int, header) -> None:
        if gen != self._generation or self.read_only:
            return
        self.header = header
        self.draw(header, [])

    def _on_step_done(self, gen: int, header, record) -> None:
        if gen != self._generation or self.read_only:
            return
        self.header = header
        self.records.append(record)
        self.on_record(record)
        self.thin_history()
        self._dirty = True

    def _draw_if_dirty(self) -> None:
        if self._dirty and not self.read_only and self.header is not None:
            self._dirty = False
            self.draw(self.header, self.records)

    def flush(self) -> None:
        """Draw what has arrived now (tests, exports)."""
        self._dirty = True
        self._draw_if_dirty()

    def shutdown(self) -> None:
        self._timer.stop()
        self._pause.set()

    # ---- snapshots ------------------------------------------------------------------------------------
    def show_snapshot(self, record) -> None:
        settings, header, records = self.replay_parts(record)
        if self._task is not None:
            self._pause.set()
            self._task.stop()
        self.read_only = True
        self.view.set_read_only(True)
        self.view.set_settings(settings)
        if header is None:
            cleared, status = self.empty_snapshot_text
            self.view.clear(cleared)
            self.view.set_status(status)
            return
        self.view.set_status(self.replay_text(header, records))
        self.draw(header, records)

    def replay_text(self, header, records) -> str:
        return f"Read-only snapshot: {len(records)} steps. Drag the step slider to replay them."

    def show_live(self) -> None:
        super().show_live()
        self.view.set_read_only(False)
        self.view.set_settings(self._settings)
        if self.header is not None:
            self.draw(self.header, self.records)
            self.view.set_status(self.ready_text())
        else:
            self.view.clear("")
