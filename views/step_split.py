"""Each execution's step time split three ways, side by side: a stacked bar per execution of
at the roof (the ops' own roof time), lost inside ops (busy below the roof) and between ops
(dispatch, Python, gaps), in milliseconds; the between-ops share written on each bar. Each part
is ONE bar item over the executions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg

from inferlab.engines.labs.step.records import ExecutionRecord
from inferlab.views.plot_items import SolidBars
from inferlab.views.style import fixed_plot

PARTS = (("at_roof_s", "at the roof", "#009E73"), ("inside_ops_s", "inside ops", "#E69F00"),
         ("between_ops_s", "between ops", "#7F7F7F"))
BAR_WIDTH = 0.6


def stacks_ms(executions: Sequence[ExecutionRecord]) -> np.ndarray:
    """[executions, 3]: each execution's at_roof, inside_ops and between_ops in ms."""
    return np.array([[getattr(r.split, name) * 1e3 for name, _l, _c in PARTS]
                     for r in executions], dtype=float).reshape(-1, len(PARTS))


def share_text(record: ExecutionRecord) -> str:
    return f"between ops {record.split.between_ops_share:.0%}"


class StepSplitBars(pg.PlotWidget):
    """Draws ExecutionRecords' splits (`draw`)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.plot = fixed_plot(self, "Where the step's time goes", "time (ms)", "execution")
        self.legend = self.plot.addLegend(offset=(5, 5), labelTextSize="8pt",
                                          colCount=len(PARTS))
        self.bars = []
        for _name, label, colour in PARTS:
            item = SolidBars(colour)
            self.plot.addItem(item)
            self.legend.addItem(item, label)
            self.bars.append(item)
        self.labels: list[pg.TextItem] = []
        self.stacks = np.zeros((0, len(PARTS)))

    def draw(self, executions: Sequence[ExecutionRecord]) -> None:
        self.stacks = stacks_ms(executions)
        n = len(self.stacks)
        x = np.arange(n, dtype=float)
        bottom = np.zeros(n)
        for i, item in enumerate(self.bars):
            item.setOpts(x0=x - BAR_WIDTH / 2, x1=x + BAR_WIDTH / 2, y0=bottom,
                         height=self.stacks[:, i])
            bottom = bottom + self.stacks[:, i]
        for label in self.labels:
            self.plot.removeItem(label)
        self.labels = []
        for i, r in enumerate(executions):
            label = pg.TextItem(share_text(r), color="#333333", anchor=(0.5, 1.0))
            label.setPos(i, bottom[i])
            self.plot.addItem(label)
            self.labels.append(label)
        self.plot.getAxis("bottom").setTicks([[(i, r.execution)
                                               for i, r in enumerate(executions)], []])
        self.plot.setXRange(-0.6, max(n, 1) - 0.4, padding=0)
        top = float(bottom.max()) if n else 1.0
        # head room for the labels over the bars and the legend over them
        self.plot.setYRange(0, top * 1.5 if top > 0 else 1.0, padding=0)
