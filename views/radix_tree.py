"""The radix prefix tree as an icicle chart: x = token position in the prompt, one row per
leaf, each node a bar over the tokens it holds (a parent spans its children's rows).

Colour says what eviction may do with a node: locked (a running request's prefix, never
evicted), evictable (an unlocked leaf: next in line), kept (unlocked, but a prefix of other
nodes). A node a match passed since the previous step is outlined (just hit). Hover names the
node's tokens (decoded when the lab gives a `decode`), its lock count, hits and first slot.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal

from inferlab.engines.kv.radix_state import RadixTreeState, icicle_rows
from inferlab.views.style import style_plot

LOCKED, EVICTABLE, KEPT, HIT = "#3b6fb6", "#b8b8b8", "#8fbf8f", "#e8731a"
LEGEND = (("locked (running)", LOCKED), ("kept (a prefix)", KEPT),
          ("evictable leaf", EVICTABLE), ("hit this step", HIT))


class RadixTreePlot(pg.PlotWidget):
    hovered = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        plot = self.getPlotItem()
        style_plot(plot)
        plot.setLabel("bottom", "token position in the prompt (tokens)")
        plot.hideAxis("left")
        plot.showGrid(x=False, y=False)  # grid lines would cut through the bars
        self.setMouseEnabled(x=True, y=False)
        self.state: RadixTreeState | None = None
        self.decode: Callable[[list[int]], str] | None = None
        self._rows: tuple[list[float], list[float]] = ([], [])
        self._message = pg.TextItem("", color="#555", anchor=(0.5, 0.5))
        self.scene().sigMouseMoved.connect(self._on_move)

    def draw(self, state: RadixTreeState | None, previous: RadixTreeState | None = None,
             message: str = "") -> None:
        """Draw `state`; nodes whose hit count rose since `previous` are outlined."""
        self.clear()
        self.state = state
        if state is None or state.n_nodes == 0:
            self._message.setText(message or "The tree is empty: no prompt is cached yet.")
            self.addItem(self._message)
            self._message.setPos(0.5, 0.5)
            self.setRange(xRange=(0, 1), yRange=(0, 1))
            return
        y, h = icicle_rows(state)
        self._rows = (y, h)
        hits_before = dict(zip(previous.node_id, previous.hit_count, strict=True)) \
            if previous is not None else {}
        has_child = set(p for p in state.parent if p >= 0)
        brushes, pens = [], []
        for i in range(state.n_nodes):
            colour = LOCKED if state.lock_ref[i] else (
                EVICTABLE if i not in has_child else KEPT)
            brushes.append(pg.mkBrush(colour))
            hit = state.hit_count[i] > hits_before.get(state.node_id[i], 0) and previous
            pens.append(pg.mkPen(HIT, width=3) if hit else pg.mkPen("#ffffff", width=1))
        x0 = np.array(state.start, dtype=float)
        width = np.array(state.n_tokens, dtype=float)
        bars = pg.BarGraphItem(x0=x0, width=width, y0=np.array(y) + 0.05,
                               height=np.array(h) - 0.1, brushes=brushes, pens=pens)
        self.addItem(bars)
        for i in range(state.n_nodes):  # token counts on bars wide enough to hold them
            if width[i] >= 0.06 * max(x0 + width):
                label = pg.TextItem(f"{state.n_tokens[i]}", color="#fff", anchor=(0.5, 0.5))
                label.setPos(x0[i] + width[i] / 2, y[i] + h[i] / 2)
                self.addItem(label)
        self.setRange(xRange=(0, float(max(x0 + width))), yRange=(0, max(
            a + b for a, b in zip(y, h, strict=True))), padding=0.02)

    def node_at(self, x: float, y: float) -> int | None:
        s = self.state
        if s is None:
            return None
        ys, hs = self._rows
        for i in range(s.n_nodes):
            if s.start[i] <= x < s.start[i] + s.n_tokens[i] and ys[i] <= y < ys[i] + hs[i]:
                return i
        return None

    def hover_text(self, i: int) -> str:
        s = self.state
        tokens = list(s.tokens[i])
        text = self.decode(tokens) if self.decode is not None else \
            " ".join(map(str, tokens[:12])) + (" …" if len(tokens) > 12 else "")
        text = text.replace("\n", "⏎")
        if len(text) > 120:
            text = text[:117] + "…"
        state = f"locked by {s.lock_ref[i]}" if s.lock_ref[i] else (
            "evictable" if s.evictable[i] else "kept")
        return (f"node {s.node_id[i]}: tokens {s.start[i]}–{s.start[i] + s.n_tokens[i] - 1} "
                f"({s.n_tokens[i]}), {state}, {s.hit_count[i]} hits, first slot "
                f"{s.first_slot[i]} · “{text}”")

    def _on_move(self, pos) -> None:
        point = self.getPlotItem().vb.mapSceneToView(pos)
        i = self.node_at(point.x(), point.y())
        self.hovered.emit(self.hover_text(i) if i is not None else "")
