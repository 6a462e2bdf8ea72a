"""The MCU lab's view: model / planner / board choices, two SRAM layouts side by side on one
y scale, the SRAM and flash budget of the board, the per-op table and the last runs.

It draws `McuState` records (live or from a snapshot) and emits what the user asks for;
the lab controller does the work.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.labs.mcu.records import McuState, RunRecord
from inferlab.views.choices import refill_choices
from inferlab.views.fact_table import FactTable
from inferlab.views.mcu_arena import ArenaPlot, kind_color
from inferlab.views.mcu_budget import BudgetBars

NO_COMPARE = "none"
OP_HEADERS = ("#", "op", "output", "MACs", "est. cycles", "est. µs", "host µs", "board µs")
HOVER_HINT = "Hover a rectangle for its tensor: name, shape, dtype, size, offset, lifetime, producer."


class McuView(QWidget):
    settings_changed = Signal(dict)
    open_requested = Signal()
    run_host_requested = Signal()
    connect_requested = Signal()
    run_board_requested = Signal()
    disconnect_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        self.state: McuState | None = None

        self.model = QComboBox()
        self.model.setToolTip("A .tflite model (the shared models folder, or one you opened)")
        self.open_button = QPushButton("Open .tflite…")
        self.open_button.setToolTip("Plan and run a .tflite model file of your own")
        self.open_button.clicked.connect(self.open_requested)
        self.planner = QComboBox()
        self.planner.setToolTip("The arena planner drawn on the left; runs use its plan")
        self.compare = QComboBox()
        self.compare.setToolTip("A second planner drawn on the right, on the same y scale")
        self.board = QComboBox()
        self.board.setToolTip("Board preset: SRAM and flash limits, clock, cycles per MAC")
        self.to_sram = QCheckBox("y up to SRAM")
        self.to_sram.setToolTip("Scale the layouts to the board's whole SRAM")
        row1 = QHBoxLayout()
        for label, widget in (("Model", self.model), (None, self.open_button),
                              ("Board", self.board)):
            if label:
                row1.addWidget(QLabel(label))
            row1.addWidget(widget)
        row1.addStretch(1)

        self.run_host_button = QPushButton("Run on host")
        self.run_host_button.setToolTip("Run the arena interpreter here on a seeded random input "
                                        "(one warm-up, best of 5) and fill host µs per op")
        self.run_host_button.clicked.connect(self.run_host_requested)
        self.connect_button = QPushButton("Connect board…")
        self.connect_button.setToolTip("A board on a serial port, a virtual board in this process, "
                                       "or the firmware for this model on an emulated Cortex-M4 "
                                       "(QEMU)")
        self.connect_button.clicked.connect(self.connect_requested)
        self.run_board_button = QPushButton("Deploy && run on board")
        self.run_board_button.setToolTip("Upload the model if the board holds another, send the "
                                         "left plan, run the same input, compare with the host")
        self.run_board_button.clicked.connect(self.run_board_requested)
        self.disconnect_button = QPushButton("Disconnect")
        self.disconnect_button.clicked.connect(self.disconnect_requested)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        row2 = QHBoxLayout()
        for w in (self.run_host_button, self.connect_button, self.run_board_button,
                  self.disconnect_button, self.to_sram):
            row2.addWidget(w)
        row2.addWidget(self.status, 1)
        self.set_board_connected(False)

        self.plots = (ArenaPlot(), ArenaPlot())
        self.plots[1].setYLink(self.plots[0])  # one y scale; steps differ between plans
        self.plots_row = plots_row = QHBoxLayout()
        plots_row.setContentsMargins(0, 0, 0, 0)
        for plot, label, combo in zip(self.plots, ("Planner", "compared with"),
                                      (self.planner, self.compare), strict=True):
            plot.hovered.connect(self._on_hover)
            header = QHBoxLayout()
            header.addWidget(QLabel(label))
            header.addWidget(combo)
            header.addStretch(1)
            column = QVBoxLayout()
            column.setSpacing(2)
            column.addLayout(header)
            column.addWidget(plot, 1)
            plots_row.addLayout(column, 1)
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.hover = QLabel(HOVER_HINT)
        self.hover.setStyleSheet("color: #333")
        self.hover.setWordWrap(True)
        top = QWidget()
        top_col = QVBoxLayout(top)
        top_col.setContentsMargins(0, 0, 0, 0)
        top_col.addLayout(plots_row, 1)
        top_col.addWidget(self.legend)
        top_col.addWidget(self.hover)

        table_box = QGroupBox("Per operator")
        self.ops_table = FactTable(OP_HEADERS)
        QVBoxLayout(table_box).addWidget(self.ops_table)
        self.budget_box = QGroupBox("Board budget")
        budget_col = QVBoxLayout(self.budget_box)
        self.budget = BudgetBars()
        budget_col.addWidget(self.budget)
        self.runs = QTextBrowser()  # scrolls when runs say more than the box holds
        self.runs.setFrameShape(QFrame.NoFrame)
        self.runs.setStyleSheet("background: transparent")
        self.runs.setMinimumHeight(40)
        budget_col.addWidget(self.runs, 1)
        bottom = QSplitter(Qt.Horizontal)
        bottom.addWidget(table_box)
        bottom.addWidget(self.budget_box)
        bottom.setSizes([680, 420])

        split = QSplitter(Qt.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([470, 270])

        layout = QVBoxLayout(self)
        layout.addLayout(row1)
        layout.addLayout(row2)
        layout.addWidget(split, 1)

        for combo, chars in ((self.model, 20), (self.planner, 10), (self.compare, 10), (self.board, 30)):
            combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(chars)
            combo.currentIndexChanged.connect(self._emit)
        self.to_sram.toggled.connect(self._on_scale)

    # inputs ---------------------------------------------------------------------------------
    def set_choices(self, models, planners, boards) -> None:
        """`models`: (path, label); `planners`: names; `boards`: (id, label)."""
        self._quiet = True
        refill_choices(self.model, models)
        refill_choices(self.planner, [(p, p) for p in planners])
        refill_choices(self.compare, [(p, p) for p in planners] + [(NO_COMPARE, "nothing")])
        refill_choices(self.board, boards)
        self._quiet = False

    def set_settings(self, s: dict) -> None:
        self._quiet = True
        for combo, key in ((self.model, "model"), (self.planner, "planner"),
                           (self.compare, "compare"), (self.board, "board")):
            index = combo.findData(s.get(key))
            if index >= 0:
                combo.setCurrentIndex(index)
        self.to_sram.setChecked(bool(s.get("y_to_sram", False)))
        self._quiet = False

    def settings(self) -> dict:
        return {"model": self.model.currentData() or "", "planner": self.planner.currentData(),
                "compare": self.compare.currentData(), "board": self.board.currentData(),
                "y_to_sram": self.to_sram.isChecked()}

    def _emit(self, *_args) -> None:
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    def _on_scale(self, *_args) -> None:
        if self.state is not None:
            self.draw(self.state)
        self._emit()

    def set_read_only(self, read_only: bool) -> None:
        for w in (self.model, self.open_button, self.planner, self.compare, self.board,
                  self.run_host_button, self.connect_button):
            w.setEnabled(not read_only)
        if read_only:
            self.run_board_button.setEnabled(False)
            self.disconnect_button.setEnabled(False)

    def set_busy(self, busy: bool) -> None:
        self.run_host_button.setEnabled(not busy)
        self.connect_button.setEnabled(not busy)
        self.run_board_button.setEnabled(not busy and self._connected)

    def set_board_connected(self, connected: bool) -> None:
        self._connected = connected
        self.run_board_button.setEnabled(connected)
        self.disconnect_button.setEnabled(connected)
        self.connect_button.setText("Reconnect / connect…" if connected else "Connect board…")

    def set_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #B71C1C" if error else "color: #333")
        self.status.setText(text)

    # drawing --------------------------------------------------------------------------------
    def y_max(self, state: McuState) -> float:
        """The shared y scale: the larger arena (or the whole SRAM when asked), plus room."""
        top = max(lay.arena_bytes for lay in state.layouts)
        if self.to_sram.isChecked() or state.board.sram_bytes <= 1.25 * top:
            top = max(top, state.board.sram_bytes)
        return top * 1.1

    def draw(self, state: McuState) -> None:
        self.state = state
        y_max = self.y_max(state)
        fit = state.fit
        first = state.layouts[0]
        for i, plot in enumerate(self.plots):
            shown = i < len(state.layouts) or (i == 1 and bool(state.compare_note))
            plot.setVisible(shown)
            self.plots_row.setStretch(i, 1 if shown else 0)
            if i >= len(state.layouts):
                if shown:
                    name, _, why = state.compare_note.partition(": ")
                    plot.show_message(f"{name}: does not apply to {state.model}", why, y_max)
                continue
            layout = state.layouts[i]
            title = layout.title()
            if i and layout.arena_bytes == first.arena_bytes and \
                    [t.offset for t in layout.tensors] == [t.offset for t in first.tensors]:
                title += f"; identical to {first.planner}"
            elif i and first.arena_bytes:
                title += f"; {layout.arena_bytes / first.arena_bytes:.2f}× {first.planner}"
            plot.draw(layout, y_max, fit.sram_bytes, fit.arena_limit_bytes, state.board.id, title)
        kinds = []
        for layout in state.layouts:
            for t in layout.tensors:
                if t.kind not in kinds:
                    kinds.append(t.kind)
        swatches = "  ".join(f"<span style='color:{kind_color(k)}'>■</span> {k}" for k in kinds)
        off_scale = ""
        if fit.sram_bytes > y_max:
            off_scale = (f"  <span style='color:#C00000'>SRAM {fit.sram_bytes / 1024:,.0f} KiB is "
                         f"{fit.sram_bytes / max(first.arena_bytes, 1):.1f}× the arena: above this "
                         "scale (tick “y up to SRAM”)</span>")
        self.legend.setText(f"<b>{state.model}</b> ({state.n_operators} ops). Colour = the op "
                            f"that writes the tensor: {swatches}  <b>━</b> high water{off_scale}")
        self._draw_ops(state)
        others = [(lay.planner, lay.arena_bytes) for lay in state.layouts[1:]
                  if lay.arena_bytes != first.arena_bytes]
        self.budget.draw(fit, others)
        self.budget_box.setTitle(f"Board budget: {state.board.name} — "
                                 + ("the model fits" if fit.fits else "the model does NOT fit"))
        self._draw_runs(state)

    def _draw_ops(self, state: McuState) -> None:
        clock_mhz = state.board.clock_hz / 1e6
        self.ops_table.setHorizontalHeaderLabels(list(OP_HEADERS))
        tips = {1: "operator type", 2: "output tensor shape", 3: "multiply-accumulates (op_macs)",
                4: f"MACs × {state.board.cycles_per_mac_int8:g} cycles/MAC ({state.board.id} preset)",
                5: f"estimated cycles ÷ {clock_mhz:g} MHz", 6: "measured on this host (arena interpreter)",
                7: "reported by the board (READ_TIMINGS), µs per op; hover a cell for its cycles: "
                   "the firmware's SysTick counts (on QEMU with -icount, 0.8 per guest "
                   "instruction), the preset's estimate on the virtual board"}
        for column, tip in tips.items():
            self.ops_table.horizontalHeaderItem(column).setToolTip(tip)
        self.ops_table.setRowCount(len(state.ops))
        board = state.board_run
        cycles = board.op_cycles if board is not None else ()
        how = "measured (SysTick)" if board is not None and board.cycles_measured else "estimated"
        for r, row in enumerate(state.ops):
            board_cycles = cycles[row.index] if row.index < len(cycles) else None
            cells = (str(row.index), row.op, "×".join(str(d) for d in row.output_shape),
                     f"{row.macs:,}", f"{row.est_cycles:,}", f"{row.est_us:,.1f}",
                     "—" if row.host_us is None else f"{row.host_us:,.1f}",
                     "—" if row.board_us is None else f"{row.board_us:,.1f}")
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c != 1:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                if c == 7 and board_cycles is not None:
                    item.setToolTip(f"{board_cycles:,} cycles {how} on {board.where} "
                                    f"(estimated: {row.est_cycles:,})")
                self.ops_table.setItem(r, c, item)
        self.ops_table.resizeRowsToContents()
        total_macs = sum(o.macs for o in state.ops)
        total_cycles = sum(o.est_cycles for o in state.ops)
        self.ops_table.setToolTip(
            f"{total_macs:,} MACs in all; × {state.board.cycles_per_mac_int8:g} cycles/MAC on "
            f"{state.board.id} = {total_cycles:,} cycles ≈ {total_cycles / state.board.clock_hz * 1e3:,.1f} ms "
            f"at {clock_mhz:g} MHz (an estimate: {state.board.notes[:160]}…)")

    def _draw_runs(self, state: McuState) -> None:
        total_cycles = sum(o.est_cycles for o in state.ops)
        seconds = total_cycles / state.board.clock_hz
        took = f"{seconds * 1e3:,.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:,.1f} µs"
        lines = [f"Estimated on {state.board.id}: {total_cycles:,} cycles = {took} at "
                 f"{state.board.clock_hz / 1e6:g} MHz."]
        if state.note:
            lines.append(f"<span style='color:#B71C1C'>{state.note}</span>")
        if state.host_run is not None:
            lines.append(_run_line("Host", state.host_run))
        if state.board_run is not None:
            lines.append(_run_line("Board", state.board_run))
        self.runs.setHtml("<br>".join(lines))

    def _on_hover(self, text: str) -> None:
        self.hover.setText(text.replace("\n", " · ") if text else HOVER_HINT)


def _run_line(kind: str, run: RunRecord) -> str:
    shown = ", ".join(str(v) for v in run.output[:8]) + (" …" if len(run.output) > 8 else "")
    shape = "×".join(str(d) for d in run.output_shape)
    text = (f"<b>{kind}</b> ({run.where}, seed {run.seed}"
            + (f", best of {run.repeats}" if run.repeats > 1 else "")
            + f"): {run.total_us / 1e3:,.2f} ms; output {run.output_dtype} {shape} = [{shown}]")
    if run.cycles is not None:
        text += f"; {run.cycles:,} cycles ({'measured' if run.cycles_measured else 'estimated'})"
    if run.round_trip_ms is not None:
        text += f"; round trip {run.round_trip_ms:,.0f} ms"
    if run.matches_host is not None:
        text += (" — <span style='color:#1B5E20'>equals the host interpreter's</span>" if run.matches_host
                 else " — <span style='color:#B71C1C'>DIFFERS from the host interpreter's</span>")
    return text
