"""MCU lab: a .tflite model's tensor arena as planners lay it out, on a board's SRAM, run on
the host interpreter or on a board over the serial protocol: a real one, the in-process
virtual board, or the C firmware built for the model and plan running on QEMU's Cortex-M4."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QDialog, QFileDialog, QMessageBox

from inferlab.app.labs.base import Lab
from inferlab.engines.board import protocol
from inferlab.engines.board.boards import list_boards, load_board
from inferlab.engines.board.session import EMULATED, BoardChoice, BoardSession, firmware_planner
from inferlab.engines.fields import clean_settings
from inferlab.engines.labs.mcu.records import McuSnapshot, RunRecord
from inferlab.engines.labs.mcu.section import mcu_section
from inferlab.engines.labs.mcu.session import (
    mcu_board_plan,
    mcu_host_run,
    mcu_op_spans,
    mcu_plans,
    mcu_state,
    mcu_with_runs,
)
from inferlab.engines.labs.mcu.settings import (
    MCU_DEFAULTS,
    MCU_NO_COMPARE,
    MCU_SETTINGS,
    mcu_planner_names,
)
from inferlab.engines.mcu.examples import default_model, example_models, examples_dir
from inferlab.engines.mcu.graph import ModelError, load_model
from inferlab.engines.mcu.inputs import random_input
from inferlab.engines.mcu.interpreter import UnsupportedOpError, check_supported
from inferlab.views.mcu_connect_dialog import ConnectDialog
from inferlab.views.mcu_view import McuView

AUTO_RUN_DELAY_MS = 300


class McuLab(Lab):
    lab_id = "mcu"

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.view = McuView()
        self.widget = self.view
        self.session = BoardSession()
        self.opened: dict[str, str] = {}  # path → label of models opened from files
        self.state = None  # the live McuState (the view may show a snapshot's instead)
        self.model = None
        self.model_bytes = b""
        self.plans: list = []  # (Plan, ms) for the planners drawn, the chosen one first
        self._model_path = None
        self._auto_ran = False
        self._waiting = False  # for other work to end before the first host run
        self._connecting: BoardChoice | None = None  # the board a connect task is for
        self._settings = self._valid(clean_settings(self.saved_settings(), MCU_SETTINGS,
                                                    MCU_DEFAULTS))
        self._refresh_choices()
        self.view.set_settings(self._settings)
        self.view.settings_changed.connect(self._on_settings)
        self.view.open_requested.connect(self.open_dialog)
        self.view.run_host_requested.connect(self.run_host)
        self.view.connect_requested.connect(self.connect_dialog)
        self.view.run_board_requested.connect(self.run_on_board)
        self.view.disconnect_requested.connect(self.disconnect_board)
        self.view.set_status("Choose a model, planners and a board. Nothing is loaded until "
                             "the lab is shown.")

    # choices and settings ------------------------------------------------------------------
    def _boards(self):
        return list_boards()

    def _planner_names(self) -> list[str]:
        return mcu_planner_names()

    def _valid(self, s: dict) -> dict:
        planners = self._planner_names()
        if s.get("planner") not in planners:
            s["planner"] = MCU_DEFAULTS["planner"]
        if s.get("compare") not in [*planners, MCU_NO_COMPARE]:
            s["compare"] = MCU_DEFAULTS["compare"]
            if s["compare"] not in planners:  # engines without the model-level planners
                s["compare"] = "best"
        if s.get("board") not in [b.id for b in self._boards()]:
            s["board"] = MCU_DEFAULTS["board"]
        path = str(s.get("model") or "")
        if not path or not os.path.isfile(path):
            path = str(default_model())
        elif Path(path).resolve().parent != examples_dir().resolve():
            self.opened[path] = f"{Path(path).stem} (opened)"
        s["model"] = path
        if not isinstance(s.get("seed"), int):
            s["seed"] = 0
        return s

    def _refresh_choices(self) -> None:
        models = [(str(p), p.stem) for p in example_models()]
        models += list(self.opened.items())
        self.view.set_choices(models, self._planner_names(),
                              [(b.id, f"{b.id} — {b.core}, {b.sram_bytes // 1024} KiB SRAM")
                               for b in self._boards()])

    def settings(self) -> dict:
        return dict(self._settings)

    def _on_settings(self, settings: dict) -> None:
        if self.read_only:
            return
        changed = any(settings.get(k) != self._settings.get(k)
                      for k in ("model", "planner", "compare", "board"))
        self._settings = dict(self._settings) | settings
        if changed:
            self.recompute()

    # the model and its plans -----------------------------------------------------------------
    def ensure_loaded(self) -> None:
        if self.state is None and not self.read_only and self._settings["model"]:
            self.recompute()

    def recompute(self) -> None:
        """Load the model if it changed, plan it, and draw (milliseconds: done right here)."""
        if self.read_only:
            return
        path = self._settings["model"]
        if not path:
            self.view.set_status("No model chosen. Use Open .tflite…",
                                 error=True)
            return
        new_model = path != self._model_path
        if new_model:
            try:
                data = Path(path).read_bytes()
                model = load_model(path)
            except (ModelError, OSError) as exc:
                self.view.set_status(f"Cannot load {Path(path).name}: {exc}", error=True)
                return
            self.model, self.model_bytes, self._model_path = model, data, path
        try:
            check_supported(self.model)
            note = ""
        except UnsupportedOpError as exc:
            note = f"Runs unavailable: {exc}"
        board = load_board(self._settings["board"])
        try:
            self.plans, compare_note = mcu_plans(self.model, self._settings)
        except ValueError as exc:
            self.view.set_status(f"Cannot plan {self.model.name} with "
                                 f"{self._settings['planner']}: {exc}", error=True)
            return
        state = mcu_state(self.model, path, board, self.plans, note, compare_note)
        if not new_model and self.state is not None:
            state = mcu_with_runs(state, self.state.host_run, self.state.board_run)
        self.state = state
        self.view.draw(state)
        if not self.busy():
            self.view.set_status(f"{self.model.name}: {len(self.model.operators)} ops, "
                                 f"{len(self.plans[0][0].buffers)} arena buffers; planned in "
                                 f"{sum(ms for _, ms in self.plans):.1f} ms." + (f" {note}" if note else ""),
                                 error=bool(note))

    def open_model(self, path: str | os.PathLike) -> None:
        """Add a .tflite file to the choices and show it. Raises ModelError / OSError."""
        path = str(Path(path).resolve())
        load_model(path)  # fail here, before anything changes
        if Path(path).parent != examples_dir().resolve():
            self.opened[path] = f"{Path(path).stem} (opened)"
        self._settings["model"] = path
        self._refresh_choices()
        self.view.set_settings(self._settings)
        self.recompute()

    def open_dialog(self) -> None:
        start = str(Path(self._settings["model"]).parent) if self._settings["model"] else ""
        path, _ = QFileDialog.getOpenFileName(self.widget, "Open a .tflite model", start,
                                              "TensorFlow Lite model (*.tflite);;All files (*)")
        if not path:
            return
        try:
            self.open_model(path)
        except (ValueError, OSError) as exc:
            QMessageBox.warning(self.widget, "Cannot open model", str(exc))

    # life cycle ---------------------------------------------------------------------------
    def activated(self) -> None:
        """Load and plan at first sight, then run once on the host for measured times."""
        self.ensure_loaded()
        if not self._auto_ran and self.state is not None and not self.state.note:
            self._auto_ran = True
            # After the first paint: the GUI thread's drawing would slow the timed ops down.
            QTimer.singleShot(AUTO_RUN_DELAY_MS, self._auto_run)

    def _auto_run(self, *_args) -> None:
        """The first host run, once nothing else runs (a benchmark would skew its times)."""
        if self.context.running_tasks():
            if not self._waiting:
                self._waiting = True
                self.context.task_ended.connect(self._auto_run)
            return
        if self._waiting:
            self._waiting = False
            self.context.task_ended.disconnect(self._auto_run)
        if self.widget.isVisible() and not self.read_only and self.state.host_run is None:
            self.run_host()

    def shutdown(self) -> None:
        self.session.close()

    def _start(self, name: str, work, on_result) -> None:
        self.view.set_busy(True)
        self.run_task(name, work, on_result, self._on_error, on_end=self._done)

    def _done(self) -> None:
        self._connecting = None  # after _connected / _on_error, or a cancelled connect
        if not self.read_only:
            self.view.set_busy(False)

    def _on_error(self, message: str) -> None:
        message = re.sub(r"^(?:\w+\.)+(\w+): ", r"\1: ", message)  # no module path
        choice, self._connecting = self._connecting or self.session.choice, None
        if not self.session.connected and choice is not None:
            self.view.set_board_connected(False)
            self._set_board(f"{choice.label()}: disconnected")
        elif self.session.connected:
            self._set_board(self._board_text())
        self.view.set_status(f"{message}. The lab is still usable"
                             + ("; connect the board again with Connect board…"
                                if not self.session.connected and choice else "."),
                             error=True)

    # runs -----------------------------------------------------------------------------------
    def run_host(self) -> None:
        """Run the arena interpreter (chosen plan, seeded random input) in a worker."""
        if self.busy() or self.read_only:
            return
        self.ensure_loaded()
        if self.state is None:
            return
        if self.state.note:
            self.view.set_status(self.state.note, error=True)
            return
        model, plan, seed = self.model, self.plans[0][0], int(self._settings["seed"])

        def work(progress, should_stop):
            progress(0.0, f"{model.name} on the arena interpreter")
            return mcu_host_run(model, plan, seed, should_stop=should_stop)[0]

        self.view.set_status(f"Running {model.name} on the host…")
        self._start(f"Run {model.name} on host", work, self._host_done)

    def _host_done(self, run) -> None:
        if self.state is None:
            return
        self.state = mcu_with_runs(self.state, host_run=run)
        mcu_op_spans(self.context.recorder, self.state)
        if not self.read_only:
            self.view.draw(self.state)
            self.view.set_status(f"Host run: {run.total_us / 1e3:,.2f} ms "
                                 f"(best of {run.repeats}, arena {run.arena_bytes:,} B).")

    def connect_dialog(self) -> None:
        dialog = ConnectDialog([(b.id, f"{b.id} — {b.name}") for b in self._boards()],
                               self._settings["board"], self.widget,
                               model=self._settings["model"], planner=self._settings["planner"])
        if dialog.exec() == QDialog.Accepted:
            choice = dialog.choice()
            if choice is not None:
                self.connect_board(choice)

    def emulated_choice(self, preset: str | None = None) -> BoardChoice:
        """The emulated board for the current model and plan (a buffer planner's: others
        cannot go into the firmware, which then uses tflm-greedy)."""
        planner, _why = firmware_planner(self._settings["planner"])
        return BoardChoice(EMULATED, preset or self._settings["board"], self._settings["model"],
                           planner)

    def connect_board(self, choice: BoardChoice | None = None) -> None:
        """Connect (or reconnect, with no choice) in a worker; the device bar shows the board.

        The emulated board is first built for the current model and plan and started on QEMU
        (reconnecting rebuilds it when the model or the planner changed)."""
        if self.busy() or self.read_only:
            return
        if choice is None and self.session.choice is not None and self.session.emulated:
            choice = self.emulated_choice(self.session.choice.target)
        choice = choice or self.session.choice
        if choice is None:
            self.connect_dialog()
            return
        message = f"Connecting to {choice.label()}…"
        if choice.kind == EMULATED:
            if self.state is not None and self.state.note:
                self.view.set_status(f"Cannot build the firmware: {self.state.note}", error=True)
                return
            _planner, why = firmware_planner(self._settings["planner"])
            message = (f"Building the firmware for {Path(choice.model).stem} ({choice.planner} "
                       f"plan, {choice.target} memory) and starting QEMU…"
                       + (f" Note: {why}." if why else ""))
        session = self.session
        self._connecting = choice
        self._set_board(f"connecting to {choice.label()}…")
        self.view.set_status(message)
        self._start(f"Connect {choice.label()}",
                    lambda progress, should_stop: session.connect(choice, progress),
                    self._connected)

    def _board_text(self) -> str:
        """The device bar's board: 'qemu nrf52840 (socket://…)' or 'name — port'."""
        session = self.session
        if session.emulated:
            return f"{session.choice.label()} ({session.url})"
        return f"{session.info.name if session.info else 'board'} — {session.url}"

    def _connected(self, info) -> None:
        self._connecting = None
        self.view.set_board_connected(True)
        self._set_board(self._board_text())
        status = (f"Connected: {info.name} ({info.core}, {info.clock_hz / 1e6:g} MHz), "
                  f"arena limit {info.arena_limit_bytes:,} B, model limit "
                  f"{info.model_limit_bytes:,} B.")
        build = self.session.firmware if self.session.emulated else None
        if build is not None:
            status += (f" Firmware for {build.model}: flash {build.flash_bytes:,} B, RAM "
                       f"{build.ram_bytes:,} B (arena {build.arena_bytes:,} B, {build.planner} "
                       "plan). Per-op times count QEMU's guest instructions (-icount), not a "
                       "real chip's time.")
        self.view.set_status(status)
        if info.board != self._settings["board"] and info.board in [b.id for b in self._boards()]:
            self._settings["board"] = info.board  # the board's own preset for the budget
            self.view.set_settings(self._settings)
            self.recompute()

    def disconnect_board(self) -> None:
        """Close the link; stops the virtual board or QEMU too."""
        if self.busy():
            return
        emulated = self.session.emulator is not None
        self.session.close()
        self.view.set_board_connected(False)
        self._set_board("no board")
        self.view.set_status("Board disconnected" + ("; QEMU stopped." if emulated else "."))

    def run_on_board(self) -> None:
        """Deploy the model and the chosen plan, run the seeded input, compare with the host.

        An emulated board built for another model is rebuilt for this one and restarted first
        (as a real board would be reflashed); a changed plan goes to it with PLAN."""
        if self.busy() or self.read_only or self.state is None:
            return
        if self.state.note:
            self.view.set_status(self.state.note, error=True)
            return
        model, plan, data, seed = self.model, self.plans[0][0], self.model_bytes, int(self._settings["seed"])
        board_plan = mcu_board_plan(plan)
        session = self.session
        in_specs = [(model.tensors[t].shape, model.tensors[t].dtype) for t in model.inputs]
        out_specs = [(model.tensors[t].shape, model.tensors[t].dtype) for t in model.outputs]
        inputs = protocol.pack_tensors(random_input(model, seed), in_specs)
        reflash = self.emulated_choice(session.choice.target) if session.emulated else None
        digest = hashlib.sha256(data).hexdigest()

        def work(progress, should_stop):
            def uploaded(done, total):
                progress(0.8 * done / max(total, 1), f"uploading {done:,} / {total:,} B")

            note = ""
            if reflash is not None and session.info is not None and \
                    session.info.model_sha256 != digest:
                session.connect(reflash, lambda f, m: progress(0.5 * f, m))
                note = f"rebuilt the firmware for {model.name} and restarted QEMU"
            result, _ = session.run(data, board_plan, inputs, progress=uploaded)
            progress(0.9, "comparing with the host interpreter")
            outputs = protocol.unpack_tensors(result.output, out_specs)
            expected = mcu_host_run(model, plan, seed, repeats=1)[1]
            same = len(outputs) == len(expected) and all(
                np.array_equal(a, b) for a, b in zip(outputs, expected, strict=True))
            first = outputs[0]
            board = (session.choice.label() if session.emulated
                     else session.info.board if session.info else "board")
            where = f"{board} on {session.url}"
            if board_plan is None:
                where += ", with its own plan"
            return RunRecord(where,
                             seed, result.time_us, tuple(o.time_us for o in result.ops),
                             tuple(first.ravel().tolist()), tuple(first.shape), str(first.dtype),
                             1, result.arena_bytes, result.round_trip_s * 1e3, result.cycles,
                             result.cycles_measured, same,
                             op_cycles=tuple(o.cycles for o in result.ops)), note

        target = session.choice.label() if session.choice else "board"
        self.view.set_status(f"Deploying {model.name} to {target}…" + (
            "" if board_plan is not None else f" The {plan.planner} plan reorders, aliases or "
            "patches, which the wire protocol's PLAN cannot carry: the board uses its own plan."))
        self._start(f"Run {model.name} on board", work, self._board_done)

    def _board_done(self, result) -> None:
        run, note = result
        if self.session.connected:
            self._set_board(self._board_text())  # a rebuilt emulated board has a new port
        if self.state is None:
            return
        self.state = mcu_with_runs(self.state, board_run=run)
        if not self.read_only:
            self.view.draw(self.state)
            verdict = "equals" if run.matches_host else "DIFFERS from"
            emulated = (" (QEMU's -icount time: guest instructions, not a real chip's)"
                        if self.session.emulated else "")
            self.view.set_status((f"{note[0].upper()}{note[1:]}. " if note else "")
                                 + f"Board run: {run.total_us / 1e3:,.2f} ms on the board"
                                 f"{emulated}, round trip {run.round_trip_ms:,.0f} ms; output "
                                 f"{verdict} the host's.", error=not run.matches_host)

    def _set_board(self, text: str) -> None:
        self.context.board = text
        self.context.board_changed.emit(text)

    # snapshots ----------------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        self.ensure_loaded()
        return mcu_section(self.settings(), self.state)

    def show_snapshot(self, record: McuSnapshot) -> None:
        settings, state = record.settings, record.state
        self.read_only = True
        self.view.set_read_only(True)
        if state is None:
            self.view.set_status("The snapshot holds no MCU model.")
            return
        self.view.set_choices([(state.model_path, state.model)],
                              [lay.planner for lay in state.layouts],
                              [(state.board.id, state.board.id)])
        shown = dict(settings, model=state.model_path, planner=state.layouts[0].planner,
                     compare=state.layouts[1].planner if len(state.layouts) > 1 else "none",
                     board=state.board.id)
        self.view.set_settings(shown)
        self.view.draw(state)
        self.view.set_status("Snapshot (read-only): back to live data with Esc.")

    def show_live(self) -> None:
        super().show_live()
        self.view.set_read_only(False)
        self.view.set_board_connected(self.session.connected)
        self._refresh_choices()
        self.view.set_settings(self._settings)
        if self.state is not None:
            self.view.draw(self.state)
        self.view.set_status("")
