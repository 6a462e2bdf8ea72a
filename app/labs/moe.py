"""MoE lab: a Mixture-of-Experts model decoding the shipped prompts at batch B, one decode
step at a time, drawn as each step's routing (tokens per expert, top-k weights, imbalance),
the experts it touched beside E·(1 − (1 − k/E)^B) and the grouped expert product against the
per-token loop; once the batch's steps are done, the B sweep (weights read and time per step
against B), and the closed forms with the numbers substituted.

A stepped lab (`SteppedLab`): the session (engines/labs/moe/session.py) lives in worker tasks
only; each step's frozen `MoEStepRecord` comes back through a queued signal; the view is
redrawn at most at the screen rate. The B sweep is one more worker task of the same queue
(`moe_run` per batch), each `BatchPoint` drawn as it arrives. The header drawn beside the
records is (MoERunInfo, the model's ModelConfig).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFileDialog

from inferlab.app.labs.stepped import SteppedLab
from inferlab.engines.fields import clean_settings
from inferlab.engines.labs.moe.formulas import moe_formulas
from inferlab.engines.labs.moe.records import MeasuredRoof, MoESnapshot
from inferlab.engines.labs.moe.section import moe_section
from inferlab.engines.labs.moe.session import (
    MoESession,
    batch_point,
    moe_model,
    moe_run,
    run_info,
)
from inferlab.engines.labs.moe.settings import MOE_DEFAULTS, MOE_SETTINGS
from inferlab.engines.model.cache import model_choices
from inferlab.views.moe_view import MoEView

AUTO_STEPS = 8
"""Steps run when the lab is first shown or its settings change (the default run's all)."""


class MoEDecoding:
    """A `MoESession` run for `n_steps` decode steps: the stepped base's `done` and
    `step_index` around its `step()`."""

    def __init__(self, session: MoESession, n_steps: int) -> None:
        self.session, self.n_steps = session, n_steps
        self.info, self.model = session.info, session.model

    @property
    def step_index(self) -> int:
        return self.session.steps_done

    @property
    def done(self) -> bool:
        return self.session.steps_done >= self.n_steps

    def step(self):
        return self.session.step()


class MoELab(SteppedLab):
    lab_id = "moe"
    task_name = "MoE lab"
    defaults = MOE_DEFAULTS
    settings_table = MOE_SETTINGS
    empty_snapshot_text = ("This snapshot holds no MoE run.",
                           "Read-only snapshot: the MoE lab had not run when it was taken.")
    sweep_point = Signal(int, object)  # generation, BatchPoint

    def __init__(self, context, parent=None):
        super().__init__(context, MoEView(), parent)
        self.sweep: list = []
        self._sweep_gen = -1
        self._replay: MoESnapshot | None = None
        self._formulas_key = None
        self._formulas: list = []
        self.view.set_models([(spec, label) for spec, label in model_choices()
                              if spec == "tiny-moe"])
        self.view.set_settings(self._settings)
        self.view.set_status("The lab loads its model when it is first shown.")
        self.view.open_requested.connect(self.open_dialog)
        self.sweep_point.connect(self._on_sweep_point)
        context.roofs_changed.connect(lambda _d: self.flush() if not self.read_only else None)

    @property
    def auto_steps(self) -> int:
        return min(int(self._settings["steps"]), AUTO_STEPS)

    @property
    def info(self):
        return self.header[0] if self.header is not None else None

    # ---- settings ----------------------------------------------------------------------------
    def valid_settings(self, s: dict) -> dict:
        s = clean_settings(s, self.settings_table, self.defaults)
        if not str(s["model"]).strip():
            s["model"] = self.defaults["model"]
        return s

    def on_settings_changed(self, changed: set) -> None:
        self.reset(auto_steps=self.auto_steps)

    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.widget, "Open a MoE model", "",
            "MoE GGUF file or Hugging Face config.json (*.gguf config.json);;All files (*)")
        if path:
            self.open_model(path)

    def open_model(self, path: str) -> None:
        """Decode the MoE model at `path` (a GGUF file, a Hugging Face folder or its
        config.json)."""
        if Path(path).name == "config.json":
            path = str(Path(path).parent)
        self.view.set_settings(dict(self._settings, model=path))
        self._on_settings(self.view.settings())

    # ---- the session -------------------------------------------------------------------------
    def preparing_text(self, settings: dict, device: str) -> str:
        return (f"Loading {settings['model']} on {device} and prefilling {settings['batch']} "
                "prompts…")

    def open_session(self, settings: dict, device: str, progress):
        progress(0.05, f"loading {settings['model']}")
        model, tok = moe_model(settings["model"], device, settings["kernels"])
        info = run_info(settings["model"], model)
        progress(0.3, f"prefilling {settings['batch']} prompts")
        session = MoESession(model, tok, info, int(settings["batch"]),
                             int(settings["prompts"]), int(settings["steps"]))
        return MoEDecoding(session, int(settings["steps"]))

    def header_of(self, session):
        return session.info, session.model.config

    def ready_text(self) -> str:
        s = self.session
        if s is None or not self.records:
            return ""
        info, steps = s.info, self.records
        step_ms = statistics.median(r.step_s for r in steps) * 1e3
        grouped = sum(r.grouped_s for r in steps)
        ratio = sum(r.per_token_s for r in steps) / grouped if grouped > 0 else float("nan")
        where = (f"{info.model_name} at B = {steps[0].batch}: {len(steps)} of {s.n_steps} "
                 f"steps, median {step_ms:.2f} ms a step, the per-token loop {ratio:.2f}× the "
                 "grouped experts' time.")
        if not s.done:
            return (f"{where} Step (N) runs one decode step, Run (Space) the rest and then the "
                    "B sweep, Ctrl+R resets.")
        swept = (f" B sweep: {len(self.current_sweep())} batches." if self._settings["sweep"]
                 else "")
        return f"{where}{swept} Reset (Ctrl+R) to decode again."

    def ended_text(self) -> str:
        return "The run has ended: Reset (Ctrl+R) to decode again."

    # ---- records ------------------------------------------------------------------------------
    def on_record(self, record) -> None:
        self.context.recorder.counter("moe", {"step_s": record.step_s,
                                              "grouped_s": record.grouped_s,
                                              "per_token_s": record.per_token_s})
        last = record.step + 1 >= int(self._settings["steps"])
        if last and self._settings["sweep"] and self._after_task is None:
            self._after_task = self.run_sweep  # once the task that stepped it has ended

    def draw(self, header, records) -> None:
        info, cfg = header
        if self.read_only and self._replay is not None:
            sweep, settings, roof = self._replay.sweep, self._replay.settings, self._replay.roof
        else:
            sweep, settings, roof = self.current_sweep(), self._settings, self.roof()
        self.view.draw_sweep(sweep, info)
        self.view.draw(info, records)
        self.view.show_formulas(self.formulas(settings, cfg, info, records, sweep, roof))

    def formulas(self, settings, cfg, info, records, sweep, roof) -> list:
        """moe_formulas of these records, kept while their number stays the same."""
        key = (id(info), len(records), len(sweep), roof, self.read_only)
        if key != self._formulas_key:
            self._formulas_key = key
            try:
                self._formulas = moe_formulas(MoESnapshot(settings, cfg, info, tuple(records),
                                                          tuple(sweep), roof))
            except ValueError as e:
                self._formulas = [("the closed forms", f"cannot be substituted: {e}")]
        return self._formulas

    def roof(self) -> MeasuredRoof | None:
        """This device's roof as the Hardware lab measured it (fp32), or None."""
        roofs = self.context.roofs(self.context.device_id)
        if roofs is None or "fp32" not in roofs.peak_flops:
            return None
        return MeasuredRoof(roofs.device, roofs.peak_flops["fp32"], roofs.bw_bytes_per_s)

    # ---- the B sweep ---------------------------------------------------------------------------
    def current_sweep(self) -> list:
        return self.sweep if self._sweep_gen == self._generation else []

    def run_sweep(self) -> None:
        """Each sweep batch's decode steps (the settings' batch reuses the run's own), in a
        worker, each BatchPoint drawn as it arrives."""
        if self.read_only or self.session is None:
            return
        if self._task is not None:
            self._after_task = self.run_sweep
            return
        gen, settings, device = self._generation, dict(self._settings), self.context.device_id
        own = list(self.records) if len(self.records) == int(settings["steps"]) else []
        batches = sorted(set(settings["sweep"]))
        self.sweep, self._sweep_gen = [], gen

        def work(progress, should_stop):
            for i, b in enumerate(batches):
                progress(i / len(batches), f"B sweep: B = {b} ({i + 1} of {len(batches)})")
                steps = own if own and b == settings["batch"] else \
                    moe_run(dict(settings, batch=b, sweep=[]), device,
                            should_stop=should_stop)[1]
                if steps and not should_stop():
                    self.sweep_point.emit(gen, batch_point(steps))

        self._start(f"{self._name()}: B sweep", work,
                    lambda _r: self.view.set_status(self.ready_text()))
        self._task.progress.connect(self._sweep_progress)

    def _sweep_progress(self, _fraction: float, message: str) -> None:
        self.view.set_status(message)

    def _on_sweep_point(self, gen: int, point) -> None:
        if gen != self._generation or self.read_only:
            return
        self.sweep.append(point)
        self.flush()

    # ---- snapshots ------------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        if self.header is None:
            return moe_section(self.settings(), None, None, [], [])
        info, cfg = self.header
        return moe_section(self.settings(), cfg, info, self.records, self.current_sweep(),
                           self.roof())

    def replay_parts(self, record: MoESnapshot):
        self._replay = record
        header = (record.info, record.model_config) if record.info is not None else None
        return record.settings, header, list(record.steps)

    def replay_text(self, header, records) -> str:
        info = header[0]
        batch = records[0].batch if records else self._replay.settings["batch"]
        return (f"Read-only snapshot: {len(records)} decode steps of {info.model_name} at "
                f"B = {batch}, {len(self._replay.sweep)} batches swept. Drag the step slider "
                "to replay them.")

    def show_live(self) -> None:
        self._replay = None
        super().show_live()
