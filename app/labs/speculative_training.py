"""The speculative lab's Training tab (views/speculative_training.py): which draft head the
lab's drafter reads for its model, drawn from the head file's record, and a head trained in
front of the user.

Both run in the lab's workers, never on the GUI thread:

    look up   the lab's model (the app-wide cache: the decode session's own copy), then
              drafters.head_path for each kind: the user cache's head, else the shipped one
              trained for this very model; where the model has no EAGLE head the shipped one
              is shown, saying whose it is
    train     heads.build.train_head on a copy of the model of its own, on the CPU (as
              `inferlab train-head` does: the decode session may step the lab's copy
              meanwhile); each curve point and the progress (throttled) come back through
              queued signals; Cancel stops it at its next step, nothing saved
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from inferlab.engines.labs.speculative.drafters import head_path, user_cache
from inferlab.engines.labs.speculative.settings import parse_drafter
from inferlab.engines.model.cache import load_lab_model, resolve_model_name
from inferlab.engines.model.registry import load_model
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.heads.build import train_head
from inferlab.engines.speculative.heads.dims import KINDS
from inferlab.engines.speculative.heads.head_file import read_record
from inferlab.engines.speculative.heads.shipped import shipped_head_path
from inferlab.engines.speculative.heads.train import TrainSettings, point_record

PROGRESS_INTERVAL_S = 0.1
"""A run's progress reaches the panel at most this often (a tiny model takes many steps a
second); the last step of a stage always does."""
LABELS = {"eagle": "EAGLE head", "medusa": "Medusa heads"}


def head_file(path: Path | None) -> tuple[str, dict, int] | None:
    """(path, record, size in bytes) of a head file, None where there is none or it does not
    read as one."""
    record = None if path is None else read_record(path)
    return None if record is None else (str(path), record, path.stat().st_size)


def _used_by(kind: str) -> str:
    """What reads a `kind` head in the lab (a kind the drafter menu does not know is said)."""
    try:
        parse_drafter(kind)
    except ValueError:
        return f"no drafter of the lab reads {LABELS[kind]} yet"
    return f"the lab's {LABELS[kind]} drafter reads it from the next Reset"


class HeadTraining(QObject):
    """The Training tab's controller, owned by the speculative lab (`lab`: its settings,
    device, workers and read-only state)."""

    point_ready = Signal(int, dict)  # run, curve point
    progress_ready = Signal(int, str, int, int, object)  # run, stage, done, total, loss

    def __init__(self, lab, panel, parent=None):
        super().__init__(parent)
        self.lab, self.panel = lab, panel
        self.train_base = TrainSettings()
        """The settings a run starts from; the panel gives its kind and epochs."""
        self.found: dict[str, tuple[str, dict, int] | None] = {}  # kind -> head_file()
        self._found_for = None  # (model, device, kernels) of `found`
        self._lookup_task = None
        self._task = None
        self._run = 0
        self.last_build = None  # (path, record, bytes) of the latest run that finished
        panel.train_requested.connect(self.train)
        panel.cancel_requested.connect(self.cancel)
        panel.kind_changed.connect(lambda _kind: self.show_head())
        self.point_ready.connect(self._on_point)
        self.progress_ready.connect(self._on_progress)

    def _model_key(self) -> tuple[str, str, str]:
        s = self.lab.settings()
        return s["model"], self.lab.context.device_id, s["kernels"]

    # ---- the head shown ----------------------------------------------------------------------
    def show_head(self) -> None:
        """Draw the head of the panel's kind for the lab's model (looked up in a worker when
        the model changed since the last look)."""
        if self._task is not None:
            return  # the run's curve stays until it ends
        key = self._model_key()
        if key == self._found_for:
            self._draw_found()
        else:
            self.look_up()

    def look_up(self) -> None:
        """Find the heads the lab's drafters read for its model (a worker: it may load it)."""
        if self._lookup_task is not None:
            return
        key = model, device, kernels = self._model_key()
        name = resolve_model_name(model)
        self.panel.set_status(f"Looking for {name}'s draft heads…")

        def work(progress, should_stop):
            target, _tok = load_lab_model(model, device, kernels=kernels)
            return {kind: head_file(head_path(target, kind)) for kind in KINDS}

        def done(found: dict) -> None:
            self.found, self._found_for = found, key

        failures: list[str] = []

        def failed(message: str) -> None:
            failures.append(message)
            self.panel.draw_head(None)
            self.panel.set_status(f"Cannot look for {name}'s heads: {message}", error=True)

        def ended() -> None:
            self._lookup_task = None
            if self._found_for != key:
                if not failures:  # cancelled (Esc, the status bar's Cancel)
                    self.panel.set_status(f"Looking for {name}'s heads was cancelled: show "
                                          "the tab again to look.")
                return
            if key != self._model_key():
                self.look_up()  # the model changed meanwhile
            elif self._task is None:
                self._draw_found()

        self._lookup_task = self.lab.run_task("Speculative lab: find the draft heads", work,
                                              done, failed, on_end=ended)

    def _draw_found(self) -> None:
        kind = self.panel.kind_key()
        name = resolve_model_name(self.lab.settings()["model"])
        got = self.found.get(kind)
        if got is not None:
            path, record, size = got
            where = ("shipped with InferLab" if shipped_head_path(kind) == Path(path)
                     else "trained in the user cache")
            self.panel.draw_head(record, path, size,
                                 f"The {LABELS[kind]} for {name} ({where}): {path}")
            return
        shipped = head_file(shipped_head_path(kind))
        if shipped is None:
            self.panel.draw_head(None, note=f"{name} has no {LABELS[kind]} yet: Train head "
                                            "makes one.")
            return
        path, record, size = shipped
        self.panel.draw_head(record, path, size,
                             f"{name} has no {LABELS[kind]} yet: shown is the one shipped "
                             f"for another model ({Path(path).name}). Train head makes one "
                             f"for {name}.")

    # ---- a run ---------------------------------------------------------------------------------
    def train(self, kind: str, epochs: int) -> None:
        """Train a `kind` head for the lab's model for `epochs` epochs, in a worker."""
        if self._task is not None or self.lab.read_only:
            return
        settings = replace(self.train_base, kind=kind, epochs=epochs)
        try:
            settings.check()
        except SpeculativeError as e:
            self.panel.set_status(f"Cannot train: {e}", error=True)
            return
        name = resolve_model_name(self.lab.settings()["model"])
        self._run += 1
        run = self._run
        self.panel.begin_run(asdict(settings))
        earlier = list(self.panel.earlier)
        outcome: list = []

        def work(progress, should_stop):
            model, tok = load_model(name)  # its own copy, on the CPU
            last_s = [0.0]

            def on_progress(stage: str, done: int, total: int, loss: float | None) -> None:
                now = time.perf_counter()
                if done >= total or now - last_s[0] >= PROGRESS_INTERVAL_S:
                    last_s[0] = now
                    self.progress_ready.emit(run, stage, done, total, loss)
                    progress(done / total if total else 0.0, f"{stage} {done}/{total}")

            build = train_head(model, tok, settings, user_cache(), None, on_progress,
                               should_stop, lambda p: self.point_ready.emit(run, point_record(p)))
            return head_file(build.path), build.train_s, build.features_s

        def finished(result) -> None:
            outcome.append(result)

        def failed(message: str) -> None:
            outcome.append(message)

        def ended() -> None:
            task, self._task = self._task, None
            self._found_for = None  # look again: the user cache has changed
            if outcome and isinstance(outcome[0], tuple):
                (path, record, size), train_s, features_s = outcome[0]
                self.last_build = (path, record, size)
                self.panel.draw_head(record, path, size, earlier=earlier)
                self.panel.end_run(
                    f"Trained the {LABELS[kind]} for {name} in {train_s:,.1f} s (features "
                    f"{features_s:,.1f} s), saved to {path}: {_used_by(kind)}.")
            elif outcome:
                self.panel.end_run(f"Training failed: {outcome[0]}", error=True)
            else:
                self.panel.end_run("Training cancelled: nothing was saved." if task is not None
                                   and task.should_stop() else "Training stopped.")

        self._task = self.lab.run_task(f"Speculative lab: train the {LABELS[kind]}", work,
                                       finished, failed, on_end=ended)

    def cancel(self) -> None:
        if self._task is not None:
            self._task.stop()

    def set_read_only(self, read_only: bool) -> None:
        self.panel.set_busy(self._task is not None, read_only)

    def _on_point(self, run: int, point: dict) -> None:
        if run == self._run and self._task is not None:
            self.panel.add_point(point)

    def _on_progress(self, run: int, stage: str, done: int, total: int, loss) -> None:
        if run == self._run and self._task is not None:
            self.panel.set_progress(stage, done, total, loss)
