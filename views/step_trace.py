"""The step lab's Trace tab: a torch.profiler Chrome trace (.json or .json.gz) summed up
(`profile.trace_profile.TraceProfile`): the kernel or op table, the time per stream or thread
(compute, memory, communication, idle), and the ops with recorded shapes on a chosen device's
roofline (this machine's measured roof or a preset's), in the same op table and roofline the
Step tab draws.

"Open trace…" asks for a file and hands its path to the lab (`open_requested`); a new roof
choice is handed the same way (`roof_changed`): the view reads nothing itself, it draws what
`draw` gets.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.labs.step.op_rows import trace_rows
from inferlab.engines.profile.trace_profile import TraceProfile
from inferlab.engines.roofline.units import format_bytes
from inferlab.views.fact_table import FactTable
from inferlab.views.roofline_plot import RoofLine
from inferlab.views.step_breakdown import LaneBreakdown
from inferlab.views.step_ops import OpTable
from inferlab.views.step_roofline import OpsRoofline

TRACE_FILTER = "torch.profiler traces (*.json *.json.gz *.pt.trace.json);;All files (*)"
MEASURED = "measured"
MAX_KERNELS = 500


def roof_lines(profile: TraceProfile) -> list[RoofLine]:
    """The roof the trace's ops were set against, one line per peak dtype its ops use (fp32
    where it has none)."""
    roof = profile.roof
    if roof is None:
        return []
    dtypes = list(dict.fromkeys(p.peak_dtype for p in profile.ops)) or ["fp32"]
    measured = roof.name.startswith(MEASURED)
    return [RoofLine(f"{roof.name} {d}", roof.peak_for(d)[1], roof.bw_bytes_per_s, measured)
            for d in dtypes]


def kernel_rows(profile: TraceProfile) -> list[tuple]:
    return [(row.name, f"{row.calls:,}", f"{row.total_s * 1e6:,.1f}",
             f"{row.mean_s * 1e6:,.2f}", f"{row.share:.1%}", {"tip": row.name})
            for row in profile.kernels[:MAX_KERNELS]]


def summary_text(profile: TraceProfile) -> str:
    level = "GPU kernels and copies" if profile.level == "gpu" else "CPU ops"
    roof = "" if profile.roof is None else \
        f" {len(profile.ops)} op shapes on the roof of {profile.roof.name}."
    return (f"{Path(profile.path).name}: {format_bytes(profile.bytes_read)}, "
            f"{profile.events:,} events; the table is its {level} ({len(profile.kernels):,} "
            f"names), {len(profile.lanes)} lane{'' if len(profile.lanes) == 1 else 's'}.{roof}")


class TraceTab(QWidget):
    """Draws a TraceProfile (`draw`). Signals ask the lab for work."""

    open_requested = Signal(str)  # a trace file's path
    roof_changed = Signal(str)  # MEASURED or a hardware preset's id

    def __init__(self, parent=None):
        super().__init__(parent)
        self.profile: TraceProfile | None = None
        self.open_button = QPushButton("Open trace…")
        self.open_button.setToolTip("A torch.profiler Chrome trace (export_chrome_trace or "
                                    "tensorboard_trace_handler), .json or .json.gz")
        self.open_button.clicked.connect(self._ask_path)
        self.roof = QComboBox()
        self.roof.setToolTip("The device whose roofline the trace's ops (those recorded with "
                             "shapes, record_shapes=True) are set against")
        self.roof.currentIndexChanged.connect(self._roof_chosen)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setVisible(False)  # shown while work runs
        self.progress.setMaximumWidth(160)
        self.status = QLabel("Open a torch.profiler trace to see its kernels, its time per "
                             "stream or thread, and its ops on a roofline.")
        self.status.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.open_button)
        row.addWidget(QLabel("Roofline of"))
        row.addWidget(self.roof)
        row.addWidget(self.progress)
        row.addStretch(1)
        self.kernels = FactTable(("Kernel or op", "Calls", "Total (µs)", "Mean (µs)",
                                  "Share"))
        self.kernels.setMinimumSize(240, 120)
        self.kernels.setWordWrap(False)
        self.breakdown = LaneBreakdown()
        self.ops = OpTable()
        self.roofline = OpsRoofline()
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(4)
        grid.addWidget(self.kernels, 0, 0)
        grid.addWidget(self.breakdown, 0, 1)
        grid.addWidget(self.ops, 1, 0)
        grid.addWidget(self.roofline, 1, 1)
        for i in range(2):
            grid.setColumnStretch(i, 1)
            grid.setRowStretch(i, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addLayout(grid, 1)
        self._quiet = False

    # ---- inputs ------------------------------------------------------------------------------
    def set_roofs(self, items, chosen: str = MEASURED) -> None:
        """(key, label) pairs of the roof combo: MEASURED first, then the presets."""
        self._quiet = True
        self.roof.clear()
        for key, label in items:
            self.roof.addItem(label, key)
        self.roof.setCurrentIndex(max(0, self.roof.findData(chosen)))
        self._quiet = False

    def roof_key(self) -> str:
        return self.roof.currentData() or MEASURED

    def _ask_path(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a torch.profiler trace", "",
                                              TRACE_FILTER)
        if path:
            self.open_requested.emit(path)

    def _roof_chosen(self, _index: int) -> None:
        if not self._quiet:
            self.roof_changed.emit(self.roof_key())

    # ---- state -------------------------------------------------------------------------------
    def set_busy(self, busy: bool) -> None:
        self.open_button.setEnabled(not busy)
        self.roof.setEnabled(not busy)
        self.progress.setVisible(busy)
        if not busy:
            self.progress.setValue(0)

    def set_read_only(self, read_only: bool) -> None:
        self.open_button.setEnabled(not read_only)
        self.roof.setEnabled(not read_only)

    def set_progress(self, fraction: float | None, message: str) -> None:
        if fraction is not None:
            self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
        if message:
            self.status.setText(message)

    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def draw(self, profile: TraceProfile | None) -> None:
        self.profile = profile
        if profile is None:
            self.kernels.set_rows([])
            self.breakdown.draw([])
            self.ops.draw([])
            self.roofline.draw([], [])
            return
        self.kernels.set_rows(kernel_rows(profile))
        self.kernels.horizontalHeader().setSectionResizeMode(0, self.kernels.horizontalHeader()
                                                             .ResizeMode.Interactive)
        self.kernels.setColumnWidth(0, 260)
        self.breakdown.draw(profile.lanes)
        rows = trace_rows(profile.ops)
        self.ops.draw(rows)
        name = "no roof" if profile.roof is None else profile.roof.name
        self.roofline.draw(rows, roof_lines(profile), f"The trace's ops on {name}")
        self.status.setText(summary_text(profile))
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
