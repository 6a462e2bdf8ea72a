"""Step lab: one forward step of a model profiled op by op under each ticked execution (eager,
torch.compile, the native decoder) on the same inputs — the ops on the measured roofline, the
step's time split, its timeline and op table side by side; and a Trace tab that reads a
torch.profiler Chrome trace.

A one-shot lab, not a stepped one: Run profiles the settings' step in a worker
(`engines.labs.step.session.step_run`, with progress, cancelled between executions); the
executions come back as one result and are drawn together. The lab runs once by itself when it
is first shown. Opening a trace reads it in a worker (`profile.trace_profile.profile_trace`,
its progress the share of the file read) against the chosen roof: this machine's measured
one (the Hardware lab's measurement where it has run, else measured here, quick sizes) or a
hardware preset's; a new roof reads the trace again.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from inferlab.app.labs.base import Lab
from inferlab.engines.fields import clean_settings
from inferlab.engines.hardware.microbench import measure_roofs
from inferlab.engines.hardware.presets import list_hardware_presets, load_hardware_preset
from inferlab.engines.labs.step.records import StepSnapshot
from inferlab.engines.labs.step.section import step_section
from inferlab.engines.labs.step.session import step_run
from inferlab.engines.labs.step.settings import STEP_DEFAULTS, STEP_SETTINGS, check_step_settings
from inferlab.engines.labs.step.trace import step_trace
from inferlab.engines.model.cache import AUTO, model_choices, resolve_model_name
from inferlab.engines.profile.op_roofline import Roof
from inferlab.engines.profile.trace_profile import profile_trace
from inferlab.views.step_trace import MEASURED
from inferlab.views.step_view import StepView, facts_text

LAB_DEFAULTS = dict(STEP_DEFAULTS, model=AUTO)
"""The window's first run: SmolLM2 where it is installed (else tiny), decode eager and native."""


def _unknown_as_minus_one(progress):
    """A worker's progress(fraction, message) taking the engines' None (not known) too."""
    return lambda fraction, message="": progress(-1.0 if fraction is None else fraction,
                                                 message)


class StepLab(Lab):
    lab_id = "step"

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.view = StepView()
        self.widget = self.view
        self.info = None
        self.executions: list = []
        self.trace = None
        self.trace_path: str | None = None
        self._run_task = None
        self._trace_task = None
        self._replay: StepSnapshot | None = None
        self._run_settings: dict | None = None  # the settings the drawn run ran with
        self._settings = clean_settings(self.saved_settings(), STEP_SETTINGS, LAB_DEFAULTS)
        form = self.view.form
        form.set_models([(AUTO, f"auto ({resolve_model_name(AUTO)})"), *model_choices()])
        form.set_settings(self._settings)
        form.settings_changed.connect(self._on_settings)
        form.run_requested.connect(self.run_profile)
        form.cancel_requested.connect(self.cancel)
        form.open_requested.connect(self.open_dialog)
        self.view.trace.set_roofs([(MEASURED, f"this machine ({context.device_id}), "
                                              "measured")]
                                  + [(p, p) for p in list_hardware_presets()])
        self.view.trace.open_requested.connect(self.open_trace)
        self.view.trace.roof_changed.connect(self._roof_changed)
        self.view.draw(None, [])
        self.view.set_status("The lab profiles its step when it is first shown.")

    def settings(self) -> dict:
        return dict(self._settings)

    # ---- settings ----------------------------------------------------------------------------
    def _on_settings(self, settings: dict) -> None:
        self._settings = clean_settings(settings, STEP_SETTINGS, LAB_DEFAULTS)
        self.save_settings()
        if not self.read_only and self._run_task is None:
            self.view.set_status("Settings changed: Run profiles the step with them.")

    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.widget, "Open a model", "",
            "GGUF file or Hugging Face config.json (*.gguf config.json);;All files (*)")
        if path:
            self.open_model(path)

    def open_model(self, path: str) -> None:
        """Profile the model at `path` (a GGUF file, a Hugging Face folder or its config)."""
        if Path(path).name == "config.json":
            path = str(Path(path).parent)
        self.view.form.set_settings(dict(self._settings, model=path))
        self._on_settings(self.view.form.settings())

    # ---- the profile -------------------------------------------------------------------------
    def activated(self) -> None:
        if self.info is None and self._run_task is None and not self.read_only:
            self.run_profile()

    def run_profile(self) -> None:
        """Profile the settings' step in a worker; drawn when every execution is done."""
        if self._run_task is not None or self.read_only:
            return
        try:
            settings = check_step_settings(self._settings)
        except ValueError as e:
            self.view.set_status(f"Settings: {e}")
            return
        device = self.context.device_id
        names = ", ".join(settings["executions"])
        self.view.set_status(f"Profiling {resolve_model_name(settings['model'])} ({names}) "
                             f"on {device}…")
        self.view.form.set_busy(True)

        def work(progress, should_stop):
            return settings, step_run(settings, device, _unknown_as_minus_one(progress),
                                      should_stop)

        self._run_task = self.run_task("Step lab: profile the step", work, self._profiled,
                                       self._failed, on_end=self._run_ended)
        self._run_task.progress.connect(self._progress)

    def _progress(self, fraction: float, message: str) -> None:
        self.view.form.set_progress(None if fraction < 0 else fraction)
        if message:
            self.view.set_status(f"{message}…" if message != "done" else "Drawing…")

    def _profiled(self, result) -> None:
        settings, (info, executions) = result
        self.info, self.executions = info, list(executions)
        self._run_settings = settings
        # each op a span in the session's trace (Perfetto, in the exported snapshot)
        step_trace(self.context.recorder, self.executions, self.context.recorder.now_s())
        if not self.read_only:
            self.draw()

    def draw(self) -> None:
        self.view.draw(self.info, self.executions)
        if self.info is not None:
            self.view.set_status(facts_text(self.info, self.executions))

    def _failed(self, message: str) -> None:
        self.view.set_status(f"Failed: {message}")

    def _run_ended(self) -> None:
        task, self._run_task = self._run_task, None
        self.view.form.set_busy(False)
        if self.read_only:
            self.view.form.set_read_only(True)
        if task is not None and task.should_stop() and not self.read_only:
            self.view.set_status("Cancelled.")

    def cancel(self) -> None:
        if self._run_task is not None:
            self._run_task.stop()

    # ---- the trace ---------------------------------------------------------------------------
    def open_trace(self, path: str) -> None:
        """Read the trace at `path` in a worker against the chosen roof, then draw it."""
        if self._trace_task is not None or self.read_only:
            return
        tab, device = self.view.trace, self.context.device_id
        key, measured = tab.roof_key(), self.context.roofs(device)
        tab.set_busy(True)
        tab.set_status(f"Reading {Path(path).name}…")

        def work(progress, _should_stop):
            if key != MEASURED:
                roofs, roof = None, Roof.from_preset(load_hardware_preset(key))
            else:
                roofs = measured
                if roofs is None:
                    progress(0.0, f"measuring the roof of {device}")
                    roofs = measure_roofs(device, quick=True)
                roof = Roof.from_measured(roofs)
            return roofs, profile_trace(path, roof, _unknown_as_minus_one(progress))

        self.trace_path = path
        self._trace_task = self.run_task("Step lab: read a trace", work, self._trace_read,
                                         self._trace_failed, on_end=self._trace_ended)
        self._trace_task.progress.connect(self._trace_progress)

    def _trace_progress(self, fraction: float, message: str) -> None:
        self.view.trace.set_progress(None if fraction < 0 else fraction, message)

    def _trace_read(self, result) -> None:
        roofs, profile = result
        if roofs is not None and self.context.roofs(roofs.device) is None:
            self.context.set_roofs(roofs)  # the other labs' measured roof too
        self.trace = profile
        if not self.read_only:
            self.view.trace.draw(profile)
            self.view.tabs.setCurrentWidget(self.view.trace)

    def _trace_failed(self, message: str) -> None:
        self.view.trace.set_status(f"Failed: {message}")

    def _trace_ended(self) -> None:
        self._trace_task = None
        self.view.trace.set_busy(False)
        if self.read_only:
            self.view.trace.set_read_only(True)

    def _roof_changed(self, _key: str) -> None:
        if self.trace_path is not None:
            self.open_trace(self.trace_path)

    # ---- snapshots ---------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        if self.info is None:
            return step_section(check_step_settings(self._settings), None, [], self.trace)
        return step_section(self._run_settings, self.info, self.executions, self.trace)

    def show_snapshot(self, record: StepSnapshot) -> None:
        self.cancel()
        self.read_only = True
        self._replay = record
        self.view.set_read_only(True)
        self.view.form.set_settings(record.settings)
        self.view.tabs.setCurrentIndex(0)
        self.view.trace.draw(record.trace)
        if record.trace is None:
            self.view.trace.set_status("This snapshot holds no trace: Show live data, then "
                                       "Open trace….")
        if record.info is None:
            self.view.draw(None, [])
            if record.trace is not None:
                self.view.tabs.setCurrentWidget(self.view.trace)
            self.view.set_status("Read-only snapshot: the step lab had not profiled a step "
                                 "when it was taken.")
            return
        self.view.draw(record.info, record.executions)
        self.view.set_status("Read-only snapshot: "
                             + facts_text(record.info, record.executions))

    def show_live(self) -> None:
        super().show_live()
        self._replay = None
        self.view.set_read_only(False)
        self.view.form.set_settings(self._settings)
        self.view.form.set_busy(self._run_task is not None)
        self.view.trace.set_busy(self._trace_task is not None)
        self.view.draw(self.info, self.executions)
        self.view.trace.draw(self.trace)
        if self.info is not None:
            self.view.set_status(facts_text(self.info, self.executions))
        else:
            self.view.set_status("Run profiles the step.")

    def shutdown(self) -> None:
        self.cancel()
