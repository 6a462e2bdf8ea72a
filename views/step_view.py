"""The step lab's view: the settings row (`StepForm`), a status line, and two tabs.

- Step: the profiled step under each execution side by side — the ops on the measured
  roofline (one dot per op name and shapes, sized by time, a colour per execution), the
  step's time split (at the roof, inside ops, between ops) as a stacked bar per execution,
  the step as a timeline (a lane per thread or the native decoder's kernels), and the op
  table.
- Trace: a torch.profiler trace's kernels, time per stream or thread and ops on a roofline
  (`TraceTab`).

It draws records (`draw(info, executions)`, `trace.draw(profile)`); its signals ask the lab
for work.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QGridLayout, QLabel, QTabWidget, QVBoxLayout, QWidget

from inferlab.engines.labs.step.op_rows import FUSED_NOTE, step_rows
from inferlab.engines.labs.step.records import ExecutionRecord, StepRunInfo
from inferlab.views.roofline_plot import RoofLine
from inferlab.views.step_form import StepForm
from inferlab.views.step_ops import OpTable
from inferlab.views.step_roofline import OpsRoofline
from inferlab.views.step_split import StepSplitBars
from inferlab.views.step_timeline import StepTimeline
from inferlab.views.step_trace import TraceTab


def run_title(info: StepRunInfo) -> str:
    shape = (f"decode, B = {info.batch} over C = {info.context}" if info.phase == "decode"
             else f"prefill of N = {info.tokens}")
    return f"{info.model_name}, {shape}, {info.threads} thread{'s' if info.threads > 1 else ''}"


def facts_text(info: StepRunInfo, executions: Sequence[ExecutionRecord]) -> str:
    """One line per execution: its step time, the between-ops share, the check against
    eager."""
    parts = []
    for r in executions:
        check = "= eager" if r.matches else f"≠ eager (max |Δ| {r.max_abs_diff:.2g})"
        if r.execution == "eager":
            check = "the reference"
        compiled = "" if r.compile_s is None else f", compiled in {r.compile_s:.1f} s"
        parts.append(f"{r.execution}: {r.step_unprofiled_s * 1e3:.2f} ms a step "
                     f"({r.step_s * 1e3:.2f} profiled), {len(r.ops)} ops, between ops "
                     f"{r.split.between_ops_share:.0%}, logits {check}{compiled}")
    fused = " Fused inductor kernels are timed only (no FLOP rule for a fusion)." \
        if any(r.execution == "compile" for r in executions) else ""
    return (f"{run_title(info)} on {info.device} ({info.cpu_capability}); roof "
            f"{info.roof.peak_flops / 1e9:.0f} GFLOP/s, "
            f"{info.roof.bw_bytes_per_s / 1e9:.1f} GB/s. " + "; ".join(parts) + "." + fused)


class StepView(QWidget):
    """Everything the step lab shows; `form` and `trace` hold the inputs and the Trace tab."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.form = StepForm()
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.roofline = OpsRoofline()
        self.split = StepSplitBars()
        self.timeline = StepTimeline()
        self.ops = OpTable()
        self.ops.setToolTip(FUSED_NOTE)
        step = QWidget()
        grid = QGridLayout(step)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(4)
        grid.addWidget(self.roofline, 0, 0)
        grid.addWidget(self.split, 0, 1)
        grid.addWidget(self.timeline, 1, 0, 1, 2)
        grid.addWidget(self.ops, 2, 0, 1, 2)
        grid.setColumnStretch(0, 3)
        grid.setColumnStretch(1, 2)
        for row, stretch in enumerate((5, 3, 4)):
            grid.setRowStretch(row, stretch)
        self.trace = TraceTab()
        self.tabs = QTabWidget()
        self.tabs.addTab(step, "Step")
        self.tabs.addTab(self.trace, "Trace")
        layout = QVBoxLayout(self)
        layout.addWidget(self.form)
        layout.addWidget(self.status)
        layout.addWidget(self.tabs, 1)
        self.info: StepRunInfo | None = None
        self.executions: tuple[ExecutionRecord, ...] = ()

    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def set_read_only(self, read_only: bool) -> None:
        self.form.set_read_only(read_only)
        self.trace.set_read_only(read_only)

    def draw(self, info: StepRunInfo | None, executions: Sequence[ExecutionRecord]) -> None:
        """The run's executions, side by side (None: nothing run yet)."""
        self.info, self.executions = info, tuple(executions)
        if info is None:
            self.roofline.draw([], [])
            self.split.draw([])
            self.timeline.draw([])
            self.ops.draw([])
            return
        rows = [row for r in executions for row in step_rows(r.execution, r.ops, info.roof)]
        roof = RoofLine(f"measured {info.device} fp32", info.roof.peak_flops,
                        info.roof.bw_bytes_per_s, measured=True)
        self.roofline.draw(rows, [roof], f"Ops on the roofline of {info.device}")
        self.split.draw(executions)
        self.timeline.draw(executions)
        self.ops.draw(rows)
