"""KV lab: a scenario's requests run by the real model through the paged KV cache, step by
step, with the contiguous allocator on the same requests beside it.

The session (engines/kvlab) lives in worker tasks only, one task at a time: loading and
preparing, one step, or running until the end or a pause. Each step's frozen record comes back
through a queued signal; the view is redrawn at most at the screen rate.
"""

from __future__ import annotations

import dataclasses
import threading

from PySide6.QtCore import QTimer, Signal

from inferlab.app.labs.base import Lab
from inferlab.engines.kvlab.scenarios import SCENARIOS
from inferlab.engines.kvlab.section import (
    KV_DEFAULTS,
    kv_metrics,
    kv_section,
    kv_trace_step,
    read_kv_section,
)
from inferlab.views.kv_view import KVView

LIVE_POOL_CELLS_LIMIT = 4_000_000
"""Live records keep every step's pool state up to this many cells in all (a 100k-block
pool: 40 steps), then every k-th step's: memory stays bounded however long a run goes."""
AUTO_STEPS = 6
"""Steps run when the lab is first shown, so it opens on something to look at."""
DRAW_INTERVAL_MS = 33


class KVLab(Lab):
    lab_id = "kv"

    step_done = Signal(int, object, object, object)  # generation, info, seq infos, record
    session_ready = Signal(int, object, object)  # generation, info, seq infos

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.view = KVView()
        self.widget = self.view
        self.session = None
        self.info = None
        self.seq_infos: tuple = ()
        self.records: list = []
        self._generation = 0
        self._task = None
        self._running = False
        self._pause = threading.Event()
        self._after_task = None  # what to start once the current task has ended
        self._dirty = False
        self._settings = self._valid(dict(KV_DEFAULTS) | self.saved_settings())
        from inferlab.engines.kvlab.models import AUTO, model_choices, resolve_model_name

        models = [(AUTO, f"auto ({resolve_model_name(AUTO)})"), *model_choices()]
        self.view.set_choices([(s.name, s.title, s.description) for s in SCENARIOS.values()],
                              models)
        self.view.set_settings(self._settings)
        self.view.set_status("The lab loads its model when it is first shown.")
        self.view.settings_changed.connect(self._on_settings)
        self.view.step_requested.connect(self.step)
        self.view.run_toggled.connect(self.toggle_run)
        self.view.reset_requested.connect(lambda: self.reset())
        self.step_done.connect(self._on_step_done)
        context.device_changed.connect(self._on_device_changed)
        self.session_ready.connect(self._on_session_ready)
        self._timer = QTimer(self)
        self._timer.setInterval(DRAW_INTERVAL_MS)
        self._timer.timeout.connect(self._draw_if_dirty)
        self._timer.start()

    # ---- settings ----------------------------------------------------------------------------
    def _valid(self, s: dict) -> dict:
        if s.get("scenario") not in SCENARIOS:
            s["scenario"] = KV_DEFAULTS["scenario"]
        if self.context.quick and "model" not in self.saved_settings():
            s["model"] = "tiny"  # tests and quick renders: no 100 MB model
        for key, low in (("block_size", 1), ("n_blocks", 0)):
            try:
                s[key] = max(low, int(s.get(key, KV_DEFAULTS[key])))
            except (TypeError, ValueError):
                s[key] = KV_DEFAULTS[key]
        return s

    def settings(self) -> dict:
        return dict(self._settings)

    def _on_settings(self, settings: dict) -> None:
        if self.read_only:
            return
        changed = {k for k in settings if settings[k] != self._settings.get(k)}
        if not changed:
            return
        self._settings = dict(self._settings) | settings
        # a new scenario is one click: reset and run it; other changes reset to step 0
        self.reset(run="scenario" in changed)

    def _on_device_changed(self, _device_id: str) -> None:
        """The model runs on the chosen device: start the scenario again there."""
        if self.session is not None and not self.read_only:
            self.reset()

    # ---- work ------------------------------------------------------------------------------
    def activated(self) -> None:
        if self.session is None and self._task is None and not self.read_only:
            self.reset(auto_steps=AUTO_STEPS, select_hit=True)

    def busy(self) -> bool:
        return self._task is not None

    def reset(self, auto_steps: int = 1, run: bool = False, select_hit: bool = False) -> None:
        """Load the model (once), prepare the scenario, run `auto_steps` steps (then all if
        `run`). `select_hit` selects the first sequence a prefix hit served, to show what a
        selection highlights (the lab's first opening)."""
        if self.read_only:
            return
        if self._task is not None:
            self._after_task = lambda: self.reset(auto_steps, run, select_hit)
            self._pause.set()
            self._task.stop()
            return
        self._generation += 1
        gen = self._generation
        settings = dict(self._settings)
        device = self.context.device_id
        self.session, self.info, self.seq_infos, self.records = None, None, (), []
        self.view.clear("Preparing…")
        from inferlab.engines.kvlab.models import resolve_model_name

        name = resolve_model_name(settings["model"])
        self.view.set_status(f"Loading {name} on {device} and preparing "
                             f"“{SCENARIOS[settings['scenario']].title}”…")

        def work(progress, should_stop):
            from inferlab.engines.kvlab.models import load_lab_model
            from inferlab.engines.kvlab.session import KVLabSession

            progress(0.05, f"loading {name}")
            model, tokenizer = load_lab_model(settings["model"], device)
            progress(0.5, "tokenizing the scenario's requests")
            session = KVLabSession(model, tokenizer, settings["scenario"],
                                   block_size=settings["block_size"],
                                   n_blocks=settings["n_blocks"] or None)
            self.session_ready.emit(gen, session.info, session.seq_infos())
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
                if select_hit and self.records:
                    hit = next((q.seq_id for q in self.records[-1].seqs
                                if q.n_cached and q.status == "running"), None)
                    if hit is not None:
                        self.view.select(hit)
                self.view.set_status(self._ready_text())
                if run:
                    self._after_task = self.toggle_run

        self._start("KV lab: prepare", work, ready)

    def _step_once(self, gen: int, session) -> None:
        """In a worker: one step, its record sent to the GUI thread."""
        record = session.step()
        self.step_done.emit(gen, session.info, session.seq_infos(), record)

    def step(self) -> None:
        if self.read_only or self._task is not None:
            return
        session, gen = self.session, self._generation
        if session is None:
            self.reset()
            return
        if session.done:
            self.view.set_status("The scenario has ended: Reset (Ctrl+R) to run it again.")
            return

        def work(progress, should_stop):
            self._step_once(gen, session)
            return None

        self._start("KV lab: step", work, lambda _r: self.view.set_status(self._ready_text()))

    def toggle_run(self) -> None:
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
            self.view.set_status("The scenario has ended: Reset (Ctrl+R) to run it again.")
            return
        self._pause.clear()
        self._running = True
        self.view.set_running(True)

        def work(progress, should_stop):
            while not session.done and not self._pause.is_set() and not should_stop():
                self._step_once(gen, session)
                progress(min(0.99, session.step_index / max(session.step_index + 10, 1)),
                         f"step {session.step_index}")
            return None

        def ended(_r=None) -> None:
            self._running = False
            self.view.set_running(False)
            self.view.set_status(self._ready_text())

        self._start("KV lab: run", work, ended, on_end=ended)

    def _start(self, name: str, work, on_result, on_end=None) -> None:
        task = self.context.run_task(name, work, on_result, self._on_error)
        self._task = task
        self.view.step_button.setEnabled(False)

        def done() -> None:
            self._task = None
            if on_end is not None:
                on_end()
            if not self._running and not self.read_only:
                self.view.set_running(False)
            follow, self._after_task = self._after_task, None
            if follow is not None and not self.read_only:
                follow()

        task.done.connect(done)

    def _on_error(self, message: str) -> None:
        self.view.set_status(f"KV lab: {message}", error=True)

    def _ready_text(self) -> str:
        s = self.session
        if s is None:
            return ""
        if s.done:
            m = kv_metrics(self.records)
            return (f"Finished after {m['steps']} steps: {m['finished']} sequences done, "
                    f"{m['refused']} refused, {m['preemptions']} preemptions, "
                    f"{m['cow_copies']} copy-on-write copies. Reset (Ctrl+R) to run it again.")
        return (f"{s.info.model_id} on {s.info.device}: step {s.step_index} next. "
                "Step (N) runs one engine step, Run (Space) runs to the end, Ctrl+R resets.")

    # ---- records arriving ------------------------------------------------------------------------
    def _on_session_ready(self, gen: int, info, seq_infos) -> None:
        if gen != self._generation or self.read_only:
            return
        self.info, self.seq_infos = info, seq_infos
        self.view.draw(info, seq_infos, [])

    def _on_step_done(self, gen: int, info, seq_infos, record) -> None:
        if gen != self._generation or self.read_only:
            return
        self.info, self.seq_infos = info, seq_infos
        self.records.append(record)
        kv_trace_step(self.context.recorder, record)
        self._thin_pools()
        self._dirty = True

    def _thin_pools(self) -> None:
        """Drop the previous record's pool state unless it is a k-th step (big pools only)."""
        n = len(self.records)
        every = -(-self.info.n_blocks * n // LIVE_POOL_CELLS_LIMIT)
        prev = n - 2
        if every > 1 and prev > 0 and prev % every and self.records[prev].pool is not None:
            self.records[prev] = dataclasses.replace(self.records[prev], pool=None)

    def _draw_if_dirty(self) -> None:
        if self._dirty and not self.read_only and self.info is not None:
            self._dirty = False
            self.view.draw(self.info, self.seq_infos, self.records)

    def flush(self) -> None:
        """Draw what has arrived now (tests, exports)."""
        self._dirty = True
        self._draw_if_dirty()

    def shutdown(self) -> None:
        self._timer.stop()
        self._pause.set()

    # ---- snapshots --------------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        return kv_section(self.settings(), self.info, self.seq_infos, self.records)

    def show_snapshot(self, section: dict) -> None:
        settings, info, seq_infos, records = read_kv_section(section)
        if self._task is not None:
            self._pause.set()
            self._task.stop()
        self.read_only = True
        self.view.set_read_only(True)
        self.view.set_settings(settings)
        if info is None:
            self.view.clear("This snapshot holds no KV run.")
            self.view.set_status("Read-only snapshot: the KV lab had not run when it was taken.")
            return
        self.view.set_status(f"Read-only snapshot: {len(records)} steps of "
                             f"“{info.scenario_title}” on {info.model_id}. Drag the step "
                             "slider to replay them.")
        self.view.draw(info, seq_infos, records)

    def show_live(self) -> None:
        super().show_live()
        self.view.set_read_only(False)
        self.view.set_settings(self._settings)
        if self.info is not None:
            self.view.draw(self.info, self.seq_infos, self.records)
            self.view.set_status(self._ready_text())
        else:
            self.view.clear("")
