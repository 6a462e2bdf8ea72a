"""The SRAM layout of one arena plan: x = operator step, y = arena offset.

Every planned buffer is a rectangle [first, last + 1) × [offset, offset + size), coloured
by the type of the op that produces it. All rectangles and their labels are ONE graphics
item (`ArenaItem`): one filled path per colour, labels painted only where they fit at the
current zoom. The high-water line and the board's SRAM limits are drawn over it.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainterPath, QPen
from PySide6.QtWidgets import QToolTip

from inferlab.engines.labs.mcu.records import GRAPH_INPUT, SCRATCH, ArenaLayout, ArenaTensor
from inferlab.views.style import PALETTE, style_plot

# One colour per op type, the same in every plot and snapshot.
OP_COLORS = {
    GRAPH_INPUT: "#9E9E9E",
    SCRATCH: "#D9D9D9",
    "CONV_2D": "#0072B2",
    "DEPTHWISE_CONV_2D": "#E69F00",
    "FULLY_CONNECTED": "#009E73",
    "AVERAGE_POOL_2D": "#CC79A7",
    "MAX_POOL_2D": "#56B4E9",
    "RESHAPE": "#F0E442",
    "SOFTMAX": "#D55E00",
    "ADD": "#8C564B",
    "QUANTIZE": "#BCBD22",
    "DEQUANTIZE": "#17BECF",
}
HIGH_WATER_COLOR = "#000000"
SRAM_COLOR = "#C00000"


def kind_color(kind: str) -> str:
    """The colour of an op type; types without a fixed colour get a stable palette entry."""
    return OP_COLORS.get(kind) or PALETTE[zlib.crc32(kind.encode()) % len(PALETTE)]


def short_name(name: str) -> str:
    """A tensor name for a label: its last path part, or the layer's when the last is a
    generic suffix ("MobilenetV1/Conv2d_3_depthwise/Relu6" → "Conv2d_3_depthwise")."""
    parts = [p for p in name.split("/") if p]
    if not parts:
        return name
    if len(parts) > 1 and len(parts[-1]) <= 8:
        return parts[-2]
    return parts[-1]


def size_text(nbytes: int) -> str:
    return f"{nbytes / 1024:.1f} KiB" if nbytes >= 1024 else f"{nbytes} B"


class BytesAxis(pg.AxisItem):
    """Byte offsets at power-of-two spacings, labelled in KiB (or B for small arenas)."""

    def __init__(self, orientation: str = "left", **kwargs):
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802,N803 - pyqtgraph API
        span = maxVal - minVal
        if not (span > 0 and size > 0 and math.isfinite(span)):
            return super().tickSpacing(minVal, maxVal, size)
        wanted = max(2.0, size / 40.0)  # about one label per 40 px
        major = 2.0 ** math.ceil(math.log2(max(span / wanted, 1.0)))
        return [(major, 0.0)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        if spacing >= 1024:
            return [f"{v / 1024:g} KiB" for v in values]
        return [f"{v:g} B" for v in values]


class ArenaItem(pg.GraphicsObject):
    """All buffers of one layout as one item: a filled path per colour, fitted labels."""

    LABEL_MIN_PX = 28.0  # narrower rectangles get no label

    def __init__(self, layout: ArenaLayout):
        super().__init__()
        self.layout = layout
        self._rects = [QRectF(t.first, t.offset, t.last + 1 - t.first, t.size) for t in layout.tensors]
        paths: dict[str, QPainterPath] = {}
        for t, rect in zip(layout.tensors, self._rects, strict=True):
            path = paths.setdefault(kind_color(t.kind), QPainterPath())
            path.addRect(rect)
        for path in paths.values():
            path.setFillRule(Qt.WindingFill)
        self.paths = paths  # colour → path: one per colour, however many buffers
        self._bounds = QRectF(0, 0, max(layout.steps, 1), max(layout.arena_bytes, 1))
        self._font = QFont()
        self._font.setPointSizeF(7.5)

    def boundingRect(self):  # noqa: N802 - Qt API
        return QRectF(self._bounds)

    def paint(self, painter, option, widget=None):
        outline = QPen(QColor(40, 40, 40, 200))
        outline.setCosmetic(True)
        outline.setWidthF(1.0)
        for color, path in self.paths.items():
            painter.setPen(outline)
            painter.setBrush(QBrush(QColor(color)))
            painter.drawPath(path)
        self._paint_labels(painter)

    def _paint_labels(self, painter) -> None:
        transform = painter.transform()
        sx, sy = transform.m11(), transform.m22()
        if transform.m12() or transform.m21() or not sx or not sy:
            return  # rotated or degenerate: no labels
        metrics = QFontMetricsF(self._font)
        line_px = metrics.height()
        painter.setFont(self._font)
        painter.setPen(QPen(QColor("#111111")))
        for t, rect in zip(self.layout.tensors, self._rects, strict=True):
            w_px, h_px = abs(rect.width() * sx), abs(rect.height() * sy)
            # Across the rectangle if the text fits, else along its height (rotated).
            rotated = False
            along, across = w_px, h_px
            lines = self._label_lines(t, metrics, along - 4, across - 2, line_px)
            if not lines and h_px > w_px:
                rotated, along, across = True, h_px, w_px
                lines = self._label_lines(t, metrics, along - 4, across - 2, line_px)
            if not lines:
                continue
            painter.save()
            # The top-left corner in data coordinates (y up), then pixels from there.
            painter.translate(QPointF(rect.left(), rect.bottom() if sy < 0 else rect.top()))
            painter.scale(1.0 / sx, 1.0 / sy)  # one unit = one pixel, y down on screen
            if rotated:
                painter.translate(0, h_px)
                painter.rotate(-90)
            painter.drawText(QRectF(2, 1, along - 4, across - 2), Qt.AlignLeft | Qt.AlignTop,
                             "\n".join(lines))
            painter.restore()

    def _label_lines(self, t: ArenaTensor, metrics, room: float, height: float, line_px: float):
        """The label lines that fit `room` × `height` pixels: name and size, or size alone."""
        if room < self.LABEL_MIN_PX - 4 or height < line_px:
            return []
        size = size_text(t.size)
        name = metrics.elidedText(short_name(t.name), Qt.ElideRight, room)
        if height >= 2 * line_px and len(name) > 4:
            return [name, size] if metrics.horizontalAdvance(size) <= room else [name]
        one = f"{name} {size}"
        if metrics.horizontalAdvance(one) <= room and "…" not in name:
            return [one]
        return [size] if metrics.horizontalAdvance(size) <= room else []


class ArenaPlot(pg.PlotWidget):
    """One plan's SRAM layout; `hovered` says what is under the mouse (a buffer, a step)."""

    hovered = Signal(str)  # "" when the mouse leaves the plot

    def __init__(self, parent=None):
        super().__init__(parent=parent, axisItems={"left": BytesAxis("left")})
        item = self.getPlotItem()
        style_plot(item)
        item.showGrid(x=False, y=True, alpha=0.2)
        item.setLabel("left", "arena offset")
        item.setLabel("bottom", "step (op i runs at step i + 1; 0 = inputs)")
        item.setMenuEnabled(False)
        self.arena_item: ArenaItem | None = None
        self.high_water_curve: pg.PlotCurveItem | None = None
        self.limit_lines: dict[str, pg.InfiniteLine] = {}
        self.layout_record: ArenaLayout | None = None
        self.hovered_tensor: ArenaTensor | None = None
        self._hover_text = ""
        self.message: pg.TextItem | None = None
        self.scene().sigMouseMoved.connect(self._on_mouse)

    def draw(self, layout: ArenaLayout, y_max: float, sram_bytes: int | None = None,
             arena_limit_bytes: int | None = None, board_label: str = "",
             title: str | None = None) -> None:
        """Draw `layout`; the y axis runs from 0 to `y_max` bytes (shared between plots)."""
        item = self.getPlotItem()
        item.clear()
        self.message = None
        self.limit_lines = {}
        self.layout_record = layout
        item.setLabel("bottom", "step (op i runs at step i + 1; 0 = inputs)" if layout.stored_order
                      else "step (its own execution order: hover to see what runs)")
        self.arena_item = ArenaItem(layout)
        item.addItem(self.arena_item)
        if layout.high_water:
            steps = np.array([s for s, _ in layout.high_water], dtype=float)
            water = np.array([w for _, w in layout.high_water], dtype=float)
            edges = np.append(steps, steps[-1] + 1)
            self.high_water_curve = pg.PlotCurveItem(
                edges, water, stepMode="center", pen=pg.mkPen(HIGH_WATER_COLOR, width=2))
            item.addItem(self.high_water_curve)
        if sram_bytes:
            self._limit("sram", sram_bytes, f"{board_label} SRAM {size_text(sram_bytes)}".strip(),
                        Qt.SolidLine, (0, 1), 0.02)
        if arena_limit_bytes and arena_limit_bytes != sram_bytes:
            self._limit("arena limit", arena_limit_bytes,
                        f"arena limit {size_text(arena_limit_bytes)} (SRAM − runtime)",
                        Qt.DashLine, (1, 0), 0.98)
        item.setTitle(title if title is not None else layout.title(), size="10pt")
        steps_n = max(layout.steps, 1)
        item.setXRange(0, steps_n, padding=0.01)
        item.setYRange(0, max(y_max, 1), padding=0)
        self._step_ticks(steps_n)

    def show_message(self, title: str, text: str, y_max: float) -> None:
        """No layout to draw: say why, on the same y scale as the other plot."""
        item = self.getPlotItem()
        item.clear()
        self.layout_record = None
        self.arena_item = None
        self.high_water_curve = None
        self.limit_lines = {}
        item.setTitle(title, size="10pt")
        item.setLabel("bottom", "")
        item.getAxis("bottom").setTicks([[]])
        self.message = pg.TextItem(text, color="#B71C1C", anchor=(0.5, 0.5))
        self.message.setTextWidth(max(200.0, self.width() * 0.8))
        item.addItem(self.message, ignoreBounds=True)
        item.setXRange(0, 1, padding=0)
        item.setYRange(0, max(y_max, 1), padding=0)
        self.message.setPos(0.5, max(y_max, 1) / 2)

    def _limit(self, key: str, value: int, text: str, style, anchor, position: float) -> None:
        line = pg.InfiniteLine(pos=value, angle=0, movable=False,
                               pen=pg.mkPen(SRAM_COLOR, width=1.5, style=style), label=text,
                               labelOpts={"position": position, "color": SRAM_COLOR,
                                          "anchors": [anchor, anchor]})
        self.getPlotItem().addItem(line, ignoreBounds=True)
        self.limit_lines[key] = line

    def _step_ticks(self, steps: int) -> None:
        width_px = max(self.getPlotItem().getViewBox().width(), 300.0)
        wanted = steps * 24 / width_px  # about one number per 24 px
        stride = next((s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500) if s >= wanted), 1000)
        ticks = [(t + 0.5, str(t)) for t in range(0, steps, stride)]
        self.getPlotItem().getAxis("bottom").setTicks([ticks])

    def resizeEvent(self, event):  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if getattr(self, "layout_record", None) is not None:
            self._step_ticks(max(self.layout_record.steps, 1))

    # hover -------------------------------------------------------------------------------
    def tensor_at(self, step: float, offset: float) -> ArenaTensor | None:
        return self.layout_record.tensor_at(step, offset) if self.layout_record else None

    def _on_mouse(self, scene_pos) -> None:
        vb = self.getPlotItem().getViewBox()
        layout = self.layout_record
        found, text = None, ""
        if layout is not None and vb.sceneBoundingRect().contains(scene_pos):
            point = vb.mapSceneToView(scene_pos)
            found = self.tensor_at(point.x(), point.y())
            step = math.floor(point.x())
            if found is not None:
                text = layout.describe(found)
            elif 0 <= step < layout.steps:
                text = f"step {step}: {layout.step_label(step) or '—'} (no buffer here)"
        self.hovered_tensor = found
        if text != self._hover_text:
            self._hover_text = text
            self.hovered.emit(text)
            if found is not None:
                QToolTip.showText(self.mapToGlobal(self.mapFromScene(scene_pos)), text, self)
            else:
                QToolTip.hideText()
