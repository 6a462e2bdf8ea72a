"""The paged KV pool as a block grid: ONE ImageItem, one cell per physical block.

Cells are uint8 codes into a lookup table of at most 256 colours (STYLE.md), so redrawing
100,000 blocks is one numpy pass and one image upload. Block i sits at row i // n_cols,
column i % n_cols, block 0 top left.

    free          no sequence holds it, nothing reusable in it
    cached-free   no sequence holds it, but it keeps a full block of prefix K/V: a prefix-cache
                  hit revives it; the free queue evicts it least recently used first
    shared        two or more sequences hold it (fork, prefix hit); ref count > 1
    a colour      held by exactly one sequence (its colour); lighter when the block is only
                  partly filled (the internal waste of paging: at most one such block a sequence)

Selecting a sequence dims every block that is not in its block table.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QToolTip

from inferlab.engines.kv.pool_state import CACHED_FREE, FREE, SHARED, USED, KVPoolState

# ---- the lookup table shared by the grid and the contiguous address line --------------------
PAD = 0
"""Past the last block (the grid's last row is not full)."""
FREE_CODE = 1
CACHED_CODE = 2
SHARED_CODE = 3
FREE_DIM = 4
CACHED_DIM = 5
SHARED_DIM = 6
EXTERNAL_CODE = 7
"""Contiguous line: a free extent too small for one more region (external fragmentation)."""
EXTERNAL_DIM = 8
OWNER_BASE = 16

SEQ_COLORS = (
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C564B",
    "#BCBD22", "#17BECF", "#7B68EE", "#E41A1C", "#4DAF4A",
)
"""Sequence colours (Okabe–Ito first); none is grey, so free/cached/shared stay distinct."""
N_SEQ_COLORS = len(SEQ_COLORS)
SPECIAL_COLORS = {
    PAD: "#FFFFFF", FREE_CODE: "#ECECEC", CACHED_CODE: "#A9A9A9", SHARED_CODE: "#2B2B2B",
    EXTERNAL_CODE: "#F4C7C3",
}
STATE_LABELS = {FREE_CODE: "free", CACHED_CODE: "cached-free (prefix kept)",
                SHARED_CODE: "shared (ref > 1)"}
PARTIAL_TINT = 0.5
"""How far a partly filled block's colour moves toward white."""
DIM_TINT = 0.78


def _rgb(hex_color: str) -> np.ndarray:
    h = hex_color.lstrip("#")
    return np.array([int(h[i: i + 2], 16) for i in (0, 2, 4)], dtype=float)


def _tint(rgb: np.ndarray, amount: float) -> np.ndarray:
    return rgb + (255.0 - rgb) * amount


def owner_code(color: np.ndarray | int, partial=0, dim=0):
    """LUT index of a sequence colour: 4 variants each (full / partial) × (normal / dimmed)."""
    return OWNER_BASE + (np.asarray(color) % N_SEQ_COLORS) * 4 + partial + 2 * np.asarray(dim)


def build_lut() -> np.ndarray:
    """uint8 [256, 4] RGBA."""
    lut = np.zeros((256, 4), dtype=float)
    lut[:, 3] = 255
    lut[:, :3] = 255
    for code, hex_color in SPECIAL_COLORS.items():
        lut[code, :3] = _rgb(hex_color)
    for code, base in ((FREE_DIM, FREE_CODE), (CACHED_DIM, CACHED_CODE),
                       (SHARED_DIM, SHARED_CODE), (EXTERNAL_DIM, EXTERNAL_CODE)):
        lut[code, :3] = _tint(lut[base, :3], DIM_TINT * 0.7)
    for i, hex_color in enumerate(SEQ_COLORS):
        rgb = _rgb(hex_color)
        full, partial = rgb, _tint(rgb, PARTIAL_TINT)
        base = OWNER_BASE + 4 * i
        lut[base, :3] = full
        lut[base + 1, :3] = partial
        lut[base + 2, :3] = _tint(full, DIM_TINT)
        lut[base + 3, :3] = _tint(partial, DIM_TINT)
    return np.round(lut).astype(np.uint8)


LUT = build_lut()


def lut_hex(code: int) -> str:
    r, g, b, _a = LUT[code]
    return f"#{r:02X}{g:02X}{b:02X}"


def seq_color_hex(color: int, partial: bool = False) -> str:
    return lut_hex(int(owner_code(color, int(partial))))


# ---- pool state -> cell codes (no Qt) -------------------------------------------------------
def grid_shape(n_blocks: int, aspect: float = 2.0) -> tuple[int, int]:
    """(rows, cols) for `n_blocks` square cells filling a width/height = `aspect` area."""
    cols = max(1, min(n_blocks, math.ceil(math.sqrt(n_blocks * max(aspect, 0.05)))))
    return -(-n_blocks // cols), cols


def block_codes(pool: KVPoolState, seq_colors: np.ndarray,
                selected: int | None = None) -> np.ndarray:
    """uint8 [n_blocks]: each block's LUT code.

    `seq_colors[i]` is the colour index of `pool.seq_ids[i]`; `selected` (an index into
    `pool.seq_ids`) dims every block outside that sequence's table.
    """
    state, n = pool.state, pool.n_blocks
    codes = np.full(n, FREE_CODE, dtype=np.uint8)
    codes[state == CACHED_FREE] = CACHED_CODE
    used = state == USED
    if used.any():
        colors = np.asarray(seq_colors, dtype=np.int64)[pool.owner[used]]
        partial = (pool.n_tokens[used] < pool.block_size).astype(np.int64)
        codes[used] = owner_code(colors, partial)
    shared = state == SHARED
    codes[shared] = SHARED_CODE
    if selected is not None:
        mine = np.zeros(n, dtype=bool)
        table = [b for b in pool.block_tables[selected] if b >= 0]  # -1: a window dropped it
        if table:
            mine[np.fromiter(table, dtype=np.int64, count=len(table))] = True
        other = ~mine
        codes[other & used] += 2
        codes[other & shared] = SHARED_DIM
        codes[other & (state == FREE)] = FREE_DIM
        codes[other & (state == CACHED_FREE)] = CACHED_DIM
    return codes


def grid_image(codes: np.ndarray, cols: int) -> np.ndarray:
    """The codes wrapped into rows of `cols` cells (row-major), the tail padded with PAD."""
    n = codes.shape[0]
    rows = -(-n // cols)
    image = np.full(rows * cols, PAD, dtype=np.uint8)
    image[:n] = codes
    return image.reshape(rows, cols)


def describe_block(pool: KVPoolState, block_id: int) -> str:
    """Hover text: block id, owner(s), ref count, fill."""
    state = int(pool.state[block_id])
    fill = f"{int(pool.n_tokens[block_id])}/{pool.block_size} tokens"
    head = f"block {block_id}"
    if state in (USED, SHARED):
        owners = pool.owners_of(block_id)
        ref = int(pool.ref_count[block_id])
        logical = []
        for sid in owners:
            table = pool.block_tables[pool.seq_ids.index(sid)]
            logical.append(f"{sid}[{table.index(block_id)}]")
        kind = "shared" if state == SHARED else "used"
        return (f"{head} · {kind} by {', '.join(logical)} (sequence[logical block]) · "
                f"ref {ref} · {fill}")
    if state == CACHED_FREE:
        where = np.flatnonzero(pool.free_queue == block_id)
        pos = f", {int(where[0])} blocks from the head of the free queue" if where.size else ""
        return (f"{head} · cached-free: no owner, keeps a prefix's K/V ({fill}); a prefix hit "
                f"revives it, reuse evicts it{pos} · ref 0")
    return f"{head} · free · ref 0"


# ---- the widget ---------------------------------------------------------------------------------
class KVGridPlot(pg.PlotWidget):
    """The pool grid. `hovered(text)` on mouse move; `block_clicked(block_id)` on click."""

    hovered = Signal(str)
    block_clicked = Signal(int)
    LINE_LIMIT = 4096
    """Cell borders are drawn (one PlotCurveItem, connect='pairs') up to this many blocks."""
    ID_LIMIT = 256
    """Block ids are written in the cells up to this many blocks (they never move: written
    once per pool size)."""

    def __init__(self, parent=None):
        super().__init__(parent=parent)
        item = self.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        for name in ("left", "bottom"):
            item.hideAxis(name)
        vb = item.getViewBox()
        vb.invertY(True)
        vb.setAspectLocked(True)
        vb.setDefaultPadding(0.01)
        self.setBackground("w")
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.image_item.setLevels((0, 255))
        self.image_item.setLookupTable(LUT)
        item.addItem(self.image_item)
        self.border_item = pg.PlotCurveItem(pen=pg.mkPen("#FFFFFF", width=1), connect="pairs",
                                            antialias=False)
        item.addItem(self.border_item)
        self.id_items: list[pg.TextItem] = []
        self.pool: KVPoolState | None = None
        self.codes: np.ndarray | None = None
        self.image: np.ndarray | None = None
        self.cols = 0
        self._shape_for = None
        self._hover_text = ""
        self.scene().sigMouseMoved.connect(self._on_mouse)
        self.scene().sigMouseClicked.connect(self._on_click)

    def draw(self, pool: KVPoolState, seq_colors: np.ndarray, selected: int | None = None) -> None:
        """Redraw every block of `pool` (one image upload)."""
        n = pool.n_blocks
        if self._shape_for != n:
            vb = self.getPlotItem().getViewBox()
            w, h = vb.width(), vb.height()
            aspect = w / h if w > 10 and h > 10 else 2.0
            _rows, self.cols = grid_shape(n, aspect)
        self.pool = pool
        self.codes = block_codes(pool, seq_colors, selected)
        self.image = grid_image(self.codes, self.cols)
        self.image_item.setImage(self.image, autoLevels=False, levels=(0, 255), lut=LUT)
        if self._shape_for != n:
            self._shape_for = n
            rows, cols = self.image.shape
            self.image_item.setRect(QRectF(0, 0, cols, rows))
            self._borders(rows, cols, n)
            self._block_ids(cols, n)
            self.getPlotItem().getViewBox().setRange(QRectF(0, 0, cols, rows), padding=0.01)
        self._show_ids()

    def _borders(self, rows: int, cols: int, n: int) -> None:
        if n > self.LINE_LIMIT:
            self.border_item.setData([], [])
            return
        last = n - (rows - 1) * cols  # cells in the last row

        def row_cells(i: int) -> int:
            return 0 if i < 0 or i >= rows else (cols if i < rows - 1 else last)

        xs, ys = [], []
        for r in range(rows + 1):
            xs += [0, max(row_cells(r - 1), row_cells(r))]
            ys += [r, r]
        for c in range(cols + 1):
            xs += [c, c]
            ys += [0, rows if c <= last else rows - 1]
        self.border_item.setData(np.array(xs, float), np.array(ys, float), connect="pairs")

    def _block_ids(self, cols: int, n: int) -> None:
        item = self.getPlotItem()
        for text in self.id_items:
            item.removeItem(text)
        self.id_items = []
        if n > self.ID_LIMIT:
            return
        font = QFont()
        font.setPointSize(7)
        for block in range(n):
            text = pg.TextItem(str(block), color="#8A8A8A", anchor=(0, 0))
            text.setFont(font)
            text.setPos(block % cols + 0.04, block // cols + 0.02)
            item.addItem(text, ignoreBounds=True)
            self.id_items.append(text)

    def cell_px(self) -> float:
        """On-screen size of one cell (the view keeps cells square)."""
        if self.image is None:
            return 0.0
        rows, cols = self.image.shape
        vb = self.getPlotItem().getViewBox()
        return min(vb.width() / cols, vb.height() / rows)

    def _show_ids(self) -> None:
        visible = self.cell_px() >= 22
        for text in self.id_items:
            text.setVisible(visible)

    def resizeEvent(self, event):  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if getattr(self, "id_items", None):
            self._show_ids()

    def block_at(self, x: float, y: float) -> int | None:
        if self.pool is None or x < 0 or y < 0:
            return None
        col, row = int(x), int(y)
        if col >= self.cols:
            return None
        block = row * self.cols + col
        return block if block < self.pool.n_blocks else None

    def _block_under(self, scene_pos) -> int | None:
        vb = self.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        point = vb.mapSceneToView(scene_pos)
        return self.block_at(point.x(), point.y())

    def _on_mouse(self, scene_pos) -> None:
        block = self._block_under(scene_pos)
        text = describe_block(self.pool, block) if block is not None else ""
        if text != self._hover_text:
            self._hover_text = text
            self.hovered.emit(text)
            if text:
                QToolTip.showText(self.mapToGlobal(self.mapFromScene(scene_pos)), text, self)
            else:
                QToolTip.hideText()

    def _on_click(self, event) -> None:
        block = self._block_under(event.scenePos())
        if block is not None:
            self.block_clicked.emit(block)
