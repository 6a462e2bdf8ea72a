"""A profiled step as a timeline: each execution's lanes (its threads, the native decoder's
kernels) one under another, every top-level op a bar from its start to its end, in
milliseconds from the step's start; the gaps between bars are the time between ops. Bars are
coloured by what the op is (a matmul, attention, another costed op, an op timed but not
costed, such as a fused inductor kernel), each colour ONE bar item; the step's end is a tick
at the right of each execution's lanes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg

from inferlab.engines.labs.step.records import ExecutionRecord
from inferlab.engines.profile.op_roofline import family
from inferlab.engines.profile.step_ops import StepOp
from inferlab.views.plot_items import SolidBars
from inferlab.views.style import fixed_plot

KINDS = (("matmul", "matmul", "#0072B2"), ("attention", "attention", "#CC79A7"),
         ("elementwise", "other costed", "#009E73"), ("uncosted", "not costed", "#E69F00"))
NATIVE_KINDS = {"native::qkv": "matmul", "native::o": "matmul", "native::gate_up": "matmul",
                "native::down": "matmul", "native::lm_head": "matmul",
                "native::attention": "attention"}
BAR_HEIGHT = 0.7


def op_kind(op: StepOp) -> str:
    """matmul, attention, elementwise (any other costed op) or uncosted."""
    if not op.costed:
        return "uncosted"
    return NATIVE_KINDS.get(op.name) or family(op.name)


def lanes_of(executions: Sequence[ExecutionRecord]) -> list[tuple[str, str]]:
    """(execution, lane) of every row, top to bottom in the executions' order."""
    return [(r.execution, lane) for r in executions for lane in r.lanes]


def title_with_key() -> str:
    """The plot's title followed by its colours' key (HTML)."""
    key = " ".join(f"<span style='color:{colour}'>■</span> {label}"
                   for _kind, label, colour in KINDS)
    return f"The step, op by op: {key}"


class StepTimeline(pg.PlotWidget):
    """Draws ExecutionRecords (`draw`)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        # the legend is in the title: over the lanes it would hide ops
        self.plot = fixed_plot(self, title_with_key(), "", "time from the step's start (ms)")
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.showGrid(x=True, y=False, alpha=0.25)
        self.bars = {}
        for kind, _label, colour in KINDS:
            item = SolidBars(colour)
            self.plot.addItem(item)
            self.bars[kind] = item
        self.ends = pg.ScatterPlotItem(symbol="|", size=14, pen=pg.mkPen("#000000", width=2),
                                       brush=None)
        self.plot.addItem(self.ends)
        self.rows: list[tuple[str, str]] = []

    def draw(self, executions: Sequence[ExecutionRecord]) -> None:
        self.rows = lanes_of(executions)
        row_of = {key: i for i, key in enumerate(self.rows)}
        parts: dict[str, list[tuple[float, float, float]]] = {k: [] for k, _l, _c in KINDS}
        ends_x, ends_y = [], []
        for r in executions:
            for op in r.ops:
                y = row_of[(r.execution, op.lane)]
                parts[op_kind(op)].append((op.start_s * 1e3, op.end_s * 1e3, y))
            for lane in r.lanes:
                ends_x.append(r.step_s * 1e3)
                ends_y.append(row_of[(r.execution, lane)])
        for kind, item in self.bars.items():
            a = np.array(parts[kind], dtype=float).reshape(-1, 3)
            item.setOpts(x0=a[:, 0], x1=np.maximum(a[:, 1], a[:, 0]), y0=a[:, 2] - BAR_HEIGHT / 2,
                         height=np.full(len(a), BAR_HEIGHT))
        self.ends.setData(ends_x, ends_y)
        axis = self.plot.getAxis("left")
        axis.setTicks([[(i, f"{e} · {lane}") for i, (e, lane) in enumerate(self.rows)], []])
        self.plot.invertY(True)
        longest = max((r.step_s for r in executions), default=0.0) * 1e3
        self.plot.setXRange(0, max(longest, 1e-3), padding=0.02)
        self.plot.setYRange(-0.6, max(len(self.rows), 1) - 0.4, padding=0)
