"""A trace's time per stream or thread (Holistic Trace Analysis's split, `profile.breakdown`):
one horizontal stacked bar per lane (a GPU stream or CPU thread) of compute, memory,
communication ("comm.") and idle, in milliseconds over the lane's span (its first event's
start to its last one's end). Each part is ONE bar item over the lanes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg

from inferlab.engines.profile.breakdown import LaneTime
from inferlab.views.plot_items import SolidBars
from inferlab.views.style import fixed_plot

PARTS = (("compute_s", "compute", "#0072B2"), ("memory_s", "memory", "#E69F00"),
         ("communication_s", "comm.", "#CC79A7"), ("idle_s", "idle", "#BBBBBB"))
BAR_HEIGHT = 0.6
MAX_LANES = 64
"""Lanes drawn (the busiest); a trace's others are counted in the title."""


def parts_ms(lanes: Sequence[LaneTime]) -> np.ndarray:
    """[lanes, 4]: compute, memory, communication and idle of each lane, in ms."""
    return np.array([[getattr(lane, name) * 1e3 for name, _l, _c in PARTS] for lane in lanes],
                    dtype=float).reshape(-1, len(PARTS))


def lane_label(lane: LaneTime) -> str:
    """The lane's name in the trace ("stream 7", "thread 10814 (python)"), its kind where the
    name does not say it."""
    return lane.name if lane.kind in lane.name else f"{lane.kind} {lane.name}"


def title_with_key(title: str = "Time per lane") -> str:
    """`title` followed by its colours' key (HTML)."""
    key = " ".join(f"<span style='color:{colour}'>■</span> {label}"
                   for _name, label, colour in PARTS)
    return f"{title}: {key}"


class LaneBreakdown(pg.PlotWidget):
    """Draws LaneTimes (`draw`), the busiest first."""

    def __init__(self, parent=None):
        super().__init__(parent)
        # the legend is in the title: over the bars it would hide them
        self.plot = fixed_plot(self, title_with_key(), "", "time (ms)")
        self.bars = []
        for _name, _label, colour in PARTS:
            item = SolidBars(colour)
            self.plot.addItem(item)
            self.bars.append(item)
        self.plot.invertY(True)
        self.lanes: tuple[LaneTime, ...] = ()
        self.parts = np.zeros((0, len(PARTS)))

    def draw(self, lanes: Sequence[LaneTime]) -> None:
        busy = sorted(lanes, key=lambda lane: -(lane.span_s - lane.idle_s))
        self.lanes = tuple(busy[:MAX_LANES])
        left = len(lanes) - len(self.lanes)
        title = "Time per lane" + \
            (f" (the {MAX_LANES} busiest of {len(lanes)})" if left else "")
        self.plot.setTitle(title_with_key(title), size="10pt")
        self.parts = parts_ms(self.lanes)
        n = len(self.parts)
        y = np.arange(n, dtype=float)
        start = np.zeros(n)
        for i, item in enumerate(self.bars):
            item.setOpts(x0=start, x1=start + self.parts[:, i], y0=y - BAR_HEIGHT / 2,
                         height=np.full(n, BAR_HEIGHT))
            start = start + self.parts[:, i]
        self.plot.getAxis("left").setTicks([[(i, lane_label(lane))
                                             for i, lane in enumerate(self.lanes)], []])
        self.plot.setXRange(0, float(start.max()) if n and start.max() > 0 else 1.0,
                            padding=0.02)
        self.plot.setYRange(-0.6, max(n, 1) - 0.4, padding=0)
