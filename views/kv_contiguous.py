"""The contiguous baseline as an address line, and both allocators' memory and waste over steps.

The address line is the contiguous cache from slot 0 to its end, ONE ImageItem one row high:
each request's region in its colour, the slots holding tokens solid and the reserved but
empty rest lighter; free extents too small for another region (external fragmentation)
pink; free space light grey. Same lookup table as the block grid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QToolTip, QWidget

from inferlab.engines.labs.kv.records import ContiguousRegion, KVStepRecord
from inferlab.views.axes import si_label
from inferlab.views.kv_grid import EXTERNAL_CODE, EXTERNAL_DIM, FREE_CODE, FREE_DIM, LUT, owner_code
from inferlab.views.style import pen, style_plot

MAX_BINS = 4096
"""The line is sampled to at most this many cells (one per slot below that)."""
LABEL_LIMIT = 32
"""Regions are named on the line up to this many."""


def address_codes(n_slots: int, regions: Sequence[ContiguousRegion],
                  free_extents: Sequence[tuple[int, int]], max_seq_len: int,
                  colors: dict, selected: str | None = None,
                  bins: int | None = None) -> np.ndarray:
    """uint8 [bins]: the LUT code at each cell's centre slot (bins = min(n_slots, MAX_BINS))."""
    bins = min(n_slots, MAX_BINS) if bins is None else bins
    slots = np.full(n_slots, FREE_DIM if selected else FREE_CODE, dtype=np.uint8)
    external = EXTERNAL_DIM if selected else EXTERNAL_CODE
    for start, length in free_extents:
        if length < max_seq_len:
            slots[start: start + length] = external
    for r in regions:
        dim = int(selected is not None and r.seq_id != selected)
        color = colors.get(r.seq_id, 0)
        slots[r.start: r.start + r.filled] = owner_code(color, 0, dim)
        slots[r.start + r.filled: r.start + r.reserved] = owner_code(color, 1, dim)
    if bins == n_slots:
        return slots
    centres = ((np.arange(bins) + 0.5) * (n_slots / bins)).astype(np.int64)
    return slots[centres]


def describe_slot(slot: int, regions: Sequence[ContiguousRegion],
                  free_extents: Sequence[tuple[int, int]], max_seq_len: int) -> str:
    for r in regions:
        if r.start <= slot < r.start + r.reserved:
            return (f"slot {slot} · {r.seq_id}'s region {r.start}..{r.start + r.reserved - 1}: "
                    f"{r.filled} of {r.reserved} slots hold tokens, "
                    f"{r.reserved - r.filled} reserved but empty")
    for start, length in free_extents:
        if start <= slot < start + length:
            kind = ("too small for a region (external fragmentation)"
                    if length < max_seq_len else "free")
            return f"slot {slot} · free extent {start}..{start + length - 1} ({length} slots): {kind}"
    return f"slot {slot}"


class SlotAxis(pg.AxisItem):
    """Slot addresses as 200k, 1.2M rather than 1e+06."""

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        return [si_label(v) for v in values]


class ContiguousLine(pg.PlotWidget):
    """One row: the contiguous cache's address space."""

    hovered = Signal(str)
    region_clicked = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent=parent, axisItems={"bottom": SlotAxis("bottom")})
        self.setBackground("w")
        item = self.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.hideAxis("left")
        item.setLabel("bottom", "address (token slots)")
        item.getAxis("bottom").enableAutoSIPrefix(False)
        vb = item.getViewBox()
        vb.setMouseEnabled(x=True, y=False)
        vb.invertY(True)
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.image_item.setLookupTable(LUT)
        item.addItem(self.image_item)
        self.bounds_item = pg.PlotCurveItem(pen=pg.mkPen("#333333", width=1), connect="pairs",
                                            antialias=False)
        item.addItem(self.bounds_item)
        self.labels: list[pg.TextItem] = []
        self.codes: np.ndarray | None = None
        self.n_slots = 0
        self.max_seq_len = 0
        self.regions: tuple[ContiguousRegion, ...] = ()
        self.free_extents: tuple[tuple[int, int], ...] = ()
        self._hover_text = ""
        self.scene().sigMouseMoved.connect(self._on_mouse)
        self.scene().sigMouseClicked.connect(self._on_click)

    def draw(self, n_slots: int, max_seq_len: int, record: KVStepRecord, colors: dict,
             selected: str | None = None, title: str = "") -> None:
        item = self.getPlotItem()
        self.regions, self.free_extents = record.regions, record.contiguous_free
        new_size = n_slots != self.n_slots
        self.n_slots, self.max_seq_len = n_slots, max_seq_len
        self.codes = address_codes(n_slots, record.regions, record.contiguous_free,
                                   max_seq_len, colors, selected)
        self.image_item.setImage(self.codes[None, :], autoLevels=False, levels=(0, 255),
                                 lut=LUT)
        self.image_item.setRect(QRectF(0, 0, n_slots, 1))
        if len(record.regions) <= 512:
            xs = np.repeat([r.start for r in record.regions] +
                           [r.start + r.reserved for r in record.regions], 2).astype(float)
            ys = np.tile([0.0, 1.0], len(xs) // 2)
            self.bounds_item.setData(xs, ys, connect="pairs")
        else:
            self.bounds_item.setData([], [])
        for label in self.labels:
            item.removeItem(label)
        self.labels = []
        if len(record.regions) <= LABEL_LIMIT:
            for r in record.regions:
                label = pg.TextItem(r.seq_id, color="#000000", anchor=(0, 0.5))
                label.setPos(r.start + n_slots * 0.003, 0.5)
                item.addItem(label, ignoreBounds=True)
                self.labels.append(label)
        if title:
            item.setTitle(title, size="9pt")
        if new_size:
            item.setXRange(0, n_slots, padding=0.005)
            item.setYRange(0, 1, padding=0.05)

    def slot_at(self, x: float) -> int | None:
        return int(x) if 0 <= x < self.n_slots else None

    def _slot_under(self, scene_pos) -> int | None:
        vb = self.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        return self.slot_at(vb.mapSceneToView(scene_pos).x())

    def _on_mouse(self, scene_pos) -> None:
        slot = self._slot_under(scene_pos)
        text = "" if slot is None else describe_slot(slot, self.regions, self.free_extents,
                                                     self.max_seq_len)
        if text != self._hover_text:
            self._hover_text = text
            self.hovered.emit(text)
            if text:
                QToolTip.showText(self.mapToGlobal(self.mapFromScene(scene_pos)), text, self)

    def _on_click(self, event) -> None:
        slot = self._slot_under(event.scenePos())
        if slot is None:
            return
        for r in self.regions:
            if r.start <= slot < r.start + r.reserved:
                self.region_clicked.emit(r.seq_id)


def _memory_unit(nbytes: int) -> tuple[float, str]:
    if nbytes >= 2**30:
        return 2.0**30, "GiB"
    if nbytes >= 2**20:
        return 2.0**20, "MiB"
    return 2.0**10, "KiB"


class KVCurves(QWidget):
    """Used memory and waste over steps, paged and contiguous on the same axes."""

    PAGED, CONTIGUOUS, TOKENS = 0, 1, 2

    def __init__(self, parent=None):
        super().__init__(parent)
        self.memory = pg.PlotWidget()
        self.waste = pg.PlotWidget()
        for plot, title in ((self.memory, "KV memory reserved"),
                            (self.waste, "Waste: reserved slots holding no token")):
            p = plot.getPlotItem()
            p.setTitle(title, size="9pt")
            p.setLabel("bottom", "step")
            p.setMenuEnabled(False)
            p.hideButtons()
            style_plot(p)
            plot.setAntialiasing(False)
            p.addLegend(offset=(4, 4), labelTextSize="8pt", brush=pg.mkBrush(255, 255, 255, 210),
                        pen=pg.mkPen("#CCCCCC"))
        self.waste.getPlotItem().setLabel("left", "waste (% of reserved)")
        self.waste.getPlotItem().setYRange(0, 100, padding=0.02)
        mp, wp = self.memory.getPlotItem(), self.waste.getPlotItem()
        self.curves = {
            "paged": mp.plot(pen=pen(0, 2), name="paged"),
            "contiguous": mp.plot(pen=pen(1, 2), name="contiguous"),
            "tokens": mp.plot(pen=pen(7, 1, dashed=True), name="tokens held"),
            "paged waste": wp.plot(pen=pen(0, 2), name="paged"),
            "contiguous waste": wp.plot(pen=pen(1, 2), name="contiguous"),
        }
        self.capacity = pg.InfiniteLine(angle=0, movable=False,
                                        pen=pg.mkPen("#777777", width=1, style=Qt.DotLine),
                                        label="cache size", labelOpts={"position": 0.97,
                                                                       "color": "#555555",
                                                                       "anchors": [(1, 0),
                                                                                   (1, 0)]})
        mp.addItem(self.capacity, ignoreBounds=False)
        self.markers = []
        for plot in (self.memory, self.waste):
            marker = pg.InfiniteLine(angle=90, movable=False,
                                     pen=pg.mkPen("#999999", width=1, style=Qt.DashLine))
            plot.getPlotItem().addItem(marker, ignoreBounds=True)
            self.markers.append(marker)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.memory)
        layout.addWidget(self.waste)
        self.unit = "KiB"

    def draw(self, records: Sequence[KVStepRecord], bytes_per_slot: int, total_slots: int,
             shown_step: int | None = None) -> None:
        per_slot = bytes_per_slot or 1
        scale, unit = _memory_unit(total_slots * per_slot)
        if not bytes_per_slot:
            scale, unit = 1.0, "token slots"
        self.unit = unit
        self.memory.getPlotItem().setLabel("left", f"reserved KV ({unit})")
        steps = np.array([r.step for r in records], dtype=float)

        def col(fn) -> np.ndarray:
            return np.array([fn(r) for r in records], dtype=float)

        k = per_slot / scale

        def paged_slots(r: KVStepRecord) -> float:
            """Slots reserved; with layer groups, each group's blocks at its own bytes (a
            window's layers hold fewer), in slots of every layer."""
            return r.used_bytes / per_slot if r.groups and bytes_per_slot else \
                r.paged.slots_reserved

        self.curves["paged"].setData(steps, col(paged_slots) * k)
        self.curves["contiguous"].setData(steps, col(lambda r: r.contiguous.slots_reserved) * k)
        self.curves["tokens"].setData(steps, col(lambda r: r.paged.slots_filled) * k)
        self.curves["paged waste"].setData(steps, col(lambda r: r.paged.waste_frac) * 100)
        self.curves["contiguous waste"].setData(steps,
                                                col(lambda r: r.contiguous.waste_frac) * 100)
        self.capacity.setValue(total_slots * k)
        self.capacity.label.setFormat(f"cache size {total_slots * k:.3g} {unit}")
        mp = self.memory.getPlotItem()
        mp.setYRange(0, total_slots * k * 1.05, padding=0)
        x_max = max(float(steps[-1]) if len(steps) else 1.0, 1.0)
        for plot in (self.memory, self.waste):
            plot.getPlotItem().setXRange(0, x_max, padding=0.02)
        for marker in self.markers:
            marker.setValue(shown_step if shown_step is not None else x_max)
