"""The attention lab's tile picture: Q, Kᵀ, S, V and O as grids of tiles with the current ones
lit, the score tile's values, and the rows' running m and ℓ.

The grids are ONE ImageItem each, one pixel per tile, uint8 codes into a small lookup table
(STYLE.md): S in the middle (query tiles down, key tiles across), Q to its left and O to its
right (query tiles), Kᵀ above and V below (key tiles). Tile states are gathered from the
records incrementally, so a redraw at step 4,000 reads only the records since the last one.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from inferlab.views.style import nowrap, style_plot

UNTOUCHED, SKIPPED, VISITED, STORED, CURRENT = range(5)
TILE_COLORS = {UNTOUCHED: "#EEEEEE", SKIPPED: "#9E9E9E", VISITED: "#9CC9E8",
               STORED: "#009E73", CURRENT: "#E69F00"}
TILE_LABELS = {UNTOUCHED: "not reached", SKIPPED: "skipped (causal, never loaded)",
               VISITED: "loaded / computed on chip", STORED: "in main memory (written)",
               CURRENT: "this step"}


READS_QK = ("scores", "tile", "chunk")
"""The phases that load Q and K tiles (naive's softmax reads S, its output P and V)."""


def _lut() -> np.ndarray:
    lut = np.full((256, 4), 255, dtype=np.ubyte)
    for code, hex_color in TILE_COLORS.items():
        h = hex_color.lstrip("#")
        lut[code, :3] = [int(h[i:i + 2], 16) for i in (0, 2, 4)]
    return lut


LUT = _lut()


class TileStates:
    """Each grid's tile codes for one head after records[:upto], kept up to date as records
    arrive (replaying from the start only when the view goes back)."""

    def __init__(self, info) -> None:
        self.info = info
        self.rows = math.ceil(info.n / info.br)
        self.cols = math.ceil(info.n / info.bc)
        self.s_rows = 1 if info.execution == "split_k" else self.rows
        self.head = -1
        self.upto = 0
        self._reset(0)

    def _reset(self, head: int) -> None:
        info = self.info
        self.head = head
        self.s = np.full((self.s_rows, self.cols), UNTOUCHED, dtype=np.ubyte)
        if info.causal and info.execution == "tiled":  # tiles after a Q tile's last row
            r1 = np.minimum(info.n, (np.arange(self.rows) + 1) * info.br)
            c0 = np.arange(self.cols) * info.bc
            self.s[c0[None, :] >= r1[:, None]] = SKIPPED
        self.q = np.full(self.rows, UNTOUCHED, dtype=np.ubyte)
        self.o = self.q.copy()
        self.k = np.full(self.cols, UNTOUCHED, dtype=np.ubyte)
        self.v = self.k.copy()

    def advance(self, records, upto: int) -> None:
        if upto < self.upto:
            self._reset(0)
            self.upto = 0
        for r in records[self.upto:upto]:
            self._apply(r)
        self.upto = upto

    def _apply(self, r) -> None:
        info = self.info
        if r.head != self.head:
            self._reset(r.head)
        i = slice(r.q_rows[0] // info.br, math.ceil(r.q_rows[1] / info.br))
        j = slice(r.k_rows[0] // info.bc, math.ceil(r.k_rows[1] / info.bc))
        srow = slice(0, 1) if info.execution == "split_k" else i
        if r.phase in ("scores", "softmax"):  # naive: S, then P, stored in main memory
            self.s[srow, j] = STORED
        elif r.phase != "combine":
            if self.s[srow, j].max() < STORED:
                self.s[srow, j] = VISITED
        if r.phase in READS_QK:
            self.q[i] = np.maximum(self.q[i], VISITED)
            self.k[j] = np.maximum(self.k[j], VISITED)
        if r.phase in ("output", "tile", "chunk"):
            self.v[j] = np.maximum(self.v[j], VISITED)
        if r.step_bytes_written and r.phase in ("output", "tile", "combine"):
            self.o[i] = STORED

    def lit(self, r):
        """The grids with the record `r`'s tiles marked as this step's."""
        info = self.info
        s, q, k, v, o = self.s.copy(), self.q.copy(), self.k.copy(), self.v.copy(), self.o.copy()
        if r is None or r.head != self.head:
            return s, q, k, v, o
        i = slice(r.q_rows[0] // info.br, math.ceil(r.q_rows[1] / info.br))
        j = slice(r.k_rows[0] // info.bc, math.ceil(r.k_rows[1] / info.bc))
        s[slice(0, 1) if info.execution == "split_k" else i, j] = CURRENT
        if r.phase in READS_QK:
            q[i] = CURRENT
            k[j] = CURRENT
        if r.phase in ("output", "tile", "chunk"):
            v[j] = CURRENT
        if r.step_bytes_written and r.phase in ("output", "tile", "combine"):
            o[i] = CURRENT
        return s, q, k, v, o


def set_title(plot, text: str) -> None:
    """The plot's title, set only when it changes (setting it lays the plot out again)."""
    if getattr(plot, "_title_text", None) != text:
        plot._title_text = text
        plot.setTitle(text, size="10pt")


def tile_legend_html() -> str:
    """The grids' colours, for a label under them (a legend inside would cover tiles)."""
    return " &nbsp; ".join(
        f"<span style='color:{TILE_COLORS[c]}; font-size:14pt'>■</span>&nbsp;"
        f"{nowrap(TILE_LABELS[c])}"
        for c in (CURRENT, VISITED, STORED, SKIPPED, UNTOUCHED))


class TileGrids(pg.PlotWidget):
    """S with Q, Kᵀ, V and O around it, in token coordinates (row 0 at the top)."""

    def __init__(self, parent=None):
        super().__init__(parent=parent)
        self.item = self.getPlotItem()
        self.item.invertY(True)
        self.item.setLabel("left", "query row (token)")
        self.item.setLabel("bottom", "key row (token)")
        self.item.hideButtons()
        self.item.setMenuEnabled(False)
        self.item.disableAutoRange()  # the range is set once per run (`place`)
        self.images = {name: pg.ImageItem(axisOrder="row-major") for name in "SQKVO"}
        self.labels = {}
        for name, image in self.images.items():
            image.setLookupTable(LUT)
            image.setLevels((0, 255))
            self.item.addItem(image)
            text = {"S": "S = QKᵀ/√d", "K": "Kᵀ", "V": "Vᵀ"}.get(name, name)
            label = pg.TextItem(text, color="#333", anchor=(0.5, 0.5))
            self.item.addItem(label)
            self.labels[name] = label
        self._layout = None

    def place(self, info) -> None:
        """Lay the five grids out for a run of N rows (once per run)."""
        n = info.n
        t = max(n / 8, 1.0)  # strip thickness and gap, in tokens
        g = t / 4
        rects = {"S": (0, 0, n, n), "Q": (-g - t, 0, t, n), "O": (n + g, 0, t, n),
                 "K": (0, -g - t, n, t), "V": (0, n + g, n, t)}
        self._rects = {name: QRectF(*r) for name, r in rects.items()}
        for name, (x, y, w, h) in rects.items():
            self.labels[name].setPos(x + w / 2, y + h / 2)
        self.item.setRange(QRectF(-g - t, -g - t, n + 2 * (g + t), n + 2 * (g + t)), padding=0.02)
        self._layout = (info.n, info.br, info.bc)

    def draw(self, states: TileStates, record) -> None:
        info = states.info
        if self._layout != (info.n, info.br, info.bc):
            self.place(info)
        s, q, k, v, o = states.lit(record)
        if info.execution == "split_k":  # one query row: S is its one row of chunks
            full = np.full((states.rows, states.cols), UNTOUCHED, dtype=np.ubyte)
            full[-1] = s[0]
            s = full
        for name, cells in (("S", s), ("Q", q[:, None]), ("O", o[:, None]), ("K", k[None, :]),
                            ("V", v[None, :])):
            self.images[name].setImage(cells, autoLevels=False, levels=(0, 255))
            self.images[name].setRect(self._rects[name])  # after setImage: it maps pixels
        head = f"head {record.head + 1} of {info.heads} · " if record and info.heads > 1 else ""
        set_title(self.item, f"{head}tiles: Br = {info.br} rows, Bc = {info.bc} keys")


class ScorePanel(QWidget):
    """The step's score tile (values, masked keys blank) and its rows' m and ℓ."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.tile_plot = pg.PlotWidget()
        self.tile = self.tile_plot.getPlotItem()
        self.tile.invertY(True)
        self.tile.hideButtons()
        self.tile.setLabel("left", "row in the tile")
        self.tile.setLabel("bottom", "key in the tile")
        self.tile.disableAutoRange()
        self._ranges: dict = {}
        self._tile_shape = None
        self._level = 0.0
        self._x_name = ""
        self.image = pg.ImageItem(axisOrder="row-major")
        self.tile.addItem(self.image)
        self.bar = pg.ColorBarItem(colorMap=pg.colormap.get("viridis"), interactive=False,
                                   width=12, label="score")
        self.bar.setImageItem(self.image, insert_in=self.tile)
        self.stats = pg.GraphicsLayoutWidget()
        self.m_plot = self.stats.addPlot(row=0, col=0)
        self.l_plot = self.stats.addPlot(row=1, col=0)
        for plot, name in ((self.m_plot, "max m"), (self.l_plot, "sum ℓ")):
            style_plot(plot)
            plot.setLabel("left", name)
            plot.hideButtons()
            plot.disableAutoRange()
        self.m_prev = self.m_plot.plot(pen=pg.mkPen("#999", width=1, style=Qt.DashLine))
        self.m_now = self.m_plot.plot(pen=pg.mkPen("#D55E00", width=2))
        self.l_prev = self.l_plot.plot(pen=pg.mkPen("#999", width=1, style=Qt.DashLine))
        self.l_now = self.l_plot.plot(pen=pg.mkPen("#0072B2", width=2))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tile_plot, 3)
        right = QVBoxLayout()
        right.addWidget(self.stats, 1)
        note = QLabel("per row: solid after this step, dashed before it")
        note.setWordWrap(True)
        note.setStyleSheet("color: #555")
        right.addWidget(note)
        layout.addLayout(right, 2)

    def _keep_range(self, plot, tile_key, x, values) -> None:
        """Set the plot's range when the Q tile changes or a value leaves it (not every step:
        a fixed range keeps the axes' cached ticks)."""
        finite = values[np.isfinite(values)]
        if not finite.size:
            return
        lo, hi = float(finite.min()), float(finite.max())
        key, (y0, y1) = self._ranges.get(id(plot), (None, (0.0, 0.0)))
        if key != tile_key or lo < y0 or hi > y1:
            pad = 0.1 * (hi - lo) + 1e-3 * max(1.0, abs(hi))
            y0, y1 = lo - pad, hi + pad
            self._ranges[id(plot)] = (tile_key, (y0, y1))
            plot.setRange(xRange=(float(x[0]), float(x[-1]) + 1e-9), yRange=(y0, y1),
                          padding=0.02)

    def clear(self) -> None:
        self._ranges.clear()
        self._tile_shape = None
        self._level = 0.0
        self.image.clear()
        for curve in (self.m_prev, self.m_now, self.l_prev, self.l_now):
            curve.setData([], [])
        self.tile.setTitle("")

    def draw(self, record, previous) -> None:
        """`previous`: the record before it when it worked on the same rows (the "before")."""
        if record is None:
            self.clear()
            return
        r0, r1 = record.q_rows
        c0, c1 = record.k_rows
        tile = record.score_tile
        if tile is None:
            self.image.clear()
            what = {"softmax": "softmax: whole rows of S", "output": "O += P tile · V tile",
                    "combine": "combine chunks by (m, ℓ)"}
            set_title(self.tile, what.get(record.phase, "score tile not kept for this step"))
        else:
            shown = np.where(np.isfinite(tile), tile, np.nan).astype(np.float32)
            finite = shown[np.isfinite(shown)]
            # Axes in the tile's own rows and keys, and colour levels that only widen: a
            # redraw then repaints no axis (their ticks are what a step's repaint costs).
            top = float(np.abs(finite).max()) if finite.size else 1.0
            if top > self._level or top < self._level / 4:
                self._level = top
                self.bar.setLevels((-top, top))
            self.image.setImage(shown, autoLevels=False, levels=(-self._level, self._level))
            self.image.setRect(QRectF(0, 0, tile.shape[1], tile.shape[0]))
            if self._tile_shape != tile.shape:
                self._tile_shape = tile.shape
                self.tile.setRange(QRectF(0, 0, tile.shape[1], tile.shape[0]), padding=0)
            masked = " (masked: blank)" if not np.isfinite(tile).all() else ""
            set_title(self.tile, f"score tile S[{r0}:{r1}, {c0}:{c1}]{masked}")
        split = record.execution == "split_k"
        x_name = "chunk" if split else "query row"
        if self._x_name != x_name:
            self._x_name = x_name
            for plot in (self.m_plot, self.l_plot):
                plot.setLabel("bottom", x_name)
        if record.m_rows is None:
            for curve in (self.m_prev, self.m_now, self.l_prev, self.l_now):
                curve.setData([], [])
            return
        x = np.arange(len(record.m_rows)) + (0 if split else r0)
        self.m_now.setData(x, _finite(record.m_rows), connect="finite")
        self.l_now.setData(x, _finite(record.l_rows), connect="finite")
        for plot, values in ((self.m_plot, record.m_rows), (self.l_plot, record.l_rows)):
            self._keep_range(plot, (record.head, record.q_rows), x, values)
        same = previous is not None and previous.m_rows is not None and \
            previous.q_rows == record.q_rows and previous.head == record.head and \
            len(previous.m_rows) == len(record.m_rows)
        self.m_prev.setData(x if same else [], _finite(previous.m_rows) if same else [],
                            connect="finite")
        self.l_prev.setData(x if same else [], _finite(previous.l_rows) if same else [],
                            connect="finite")


def _finite(a):
    return np.where(np.isfinite(a), a, np.nan)
