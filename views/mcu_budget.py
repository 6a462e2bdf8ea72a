"""SRAM and flash budget bars of one board: what the plan and the model take, what is left.

SRAM: arena + runtime overhead against the chip's SRAM; flash: the model file (weights and
graph, executed in place: "model file") + the runtime's code against flash. Each bar is drawn to its own
capacity, with the numbers above it in KiB and bytes. Two bars and a few words: painted
directly, no plot needed.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from inferlab.engines.board.boards import FitCheck

COLORS = {"arena": "#0072B2", "runtime RAM": "#7F7F7F", "model file": "#E69F00",
          "runtime code": "#595959", "free": "#C8E6C9", "over": "#D55E00"}
OK_COLOR, OVER_COLOR = "#1B5E20", "#B71C1C"
BAR_PX, LINE_PX, GAP_PX = 18, 17, 8


def kib(nbytes: int) -> str:
    return f"{nbytes / 1024:,.1f} KiB" if abs(nbytes) >= 1024 else f"{nbytes} B"


def margin_text(margin: int) -> str:
    if margin >= 0:
        return f"margin {kib(margin)} ({margin:,} B)"
    return f"OVER by {kib(-margin)} ({-margin:,} B)"


class BudgetBars(QWidget):
    """`draw(fit, others)`: the two bars; `others` marks other plans' arenas on SRAM."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.fit: FitCheck | None = None
        self.others: list[tuple[str, int]] = []
        self.segments: dict[str, list[tuple[str, int]]] = {}
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.setFixedHeight(self.sizeHint().height())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        others = len(getattr(self, "others", ()))
        return QSize(360, 2 * (LINE_PX + BAR_PX + GAP_PX) + (others + 1) * LINE_PX + 4)

    def draw(self, fit: FitCheck, others=()) -> None:
        self.fit = fit
        self.others = [(label, int(arena)) for label, arena in others]
        sram = [("arena", fit.arena_bytes), ("runtime RAM", fit.runtime_overhead_bytes)]
        flash = [("model file", fit.weights_bytes), ("runtime code", fit.code_bytes)]
        if fit.fits_sram:
            sram.append(("free", fit.sram_margin_bytes))
        if fit.fits_flash:
            flash.append(("free", fit.flash_margin_bytes))
        self.segments = {"SRAM": sram, "flash": flash}
        self.setToolTip(fit.summary())
        self.setFixedHeight(self.sizeHint().height())
        self.update()

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt API
        if self.fit is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.Antialiasing, False)
        fit = self.fit
        width = self.width() - 8
        y = 2
        rows = (("SRAM", fit.sram_bytes, fit.sram_used_bytes, fit.sram_margin_bytes),
                ("flash", fit.flash_bytes, fit.flash_used_bytes, fit.flash_margin_bytes))
        bold = QFont(self.font())
        bold.setBold(True)
        for name, capacity, used, margin in rows:
            painter.setPen(QColor("#222"))
            painter.setFont(bold)
            painter.drawText(QRectF(4, y, width, LINE_PX), Qt.AlignLeft | Qt.AlignVCenter,
                             f"{name} {kib(capacity)}")
            name_w = painter.fontMetrics().horizontalAdvance(f"{name} {kib(capacity)}  ")
            painter.setFont(self.font())
            metrics = painter.fontMetrics()
            used_text = f"{kib(used)} used"
            painter.drawText(QRectF(4 + name_w, y, width - name_w, LINE_PX),
                             Qt.AlignLeft | Qt.AlignVCenter, used_text)
            room = width - name_w - metrics.horizontalAdvance(used_text) - 12
            text = margin_text(margin)
            if metrics.horizontalAdvance(text) > room:  # narrow: bytes are in the tooltip
                text = text.split(" (")[0]
            painter.setPen(QColor(OK_COLOR if margin >= 0 else OVER_COLOR))
            painter.drawText(QRectF(4, y, width, LINE_PX), Qt.AlignRight | Qt.AlignVCenter, text)
            y += LINE_PX
            scale = width / max(capacity, used)  # an overflowing bar is shrunk to fit
            x = 4.0
            for segment, nbytes in self.segments[name]:
                w = max(nbytes, 0) * scale
                painter.fillRect(QRectF(x, y, w, BAR_PX), QColor(COLORS[segment]))
                x += w
            painter.setPen(QPen(QColor("#444"), 1))
            painter.setBrush(Qt.NoBrush)
            painter.drawRect(QRectF(4, y, width, BAR_PX))
            if used > capacity:  # the capacity line inside the overflowing bar
                painter.setPen(QPen(QColor(OVER_COLOR), 2))
                painter.drawLine(4 + capacity * scale, y - 2, 4 + capacity * scale, y + BAR_PX + 2)
            if name == "SRAM" and self.others:
                # Other plans: a dashed mark where their SRAM use would end, named below.
                for k, (label, arena) in enumerate(self.others):
                    used_other = arena + fit.runtime_overhead_bytes
                    mx = 4 + min(used_other, max(capacity, used)) * scale
                    painter.setPen(QPen(QColor("#000"), 1.5, Qt.DashLine))
                    painter.drawLine(mx, y - 2, mx, y + BAR_PX + 3 + k * LINE_PX)
                    painter.setPen(QColor("#000"))
                    text = f"{label}: arena {kib(arena)}, {kib(used_other)} used"
                    row = QRectF(4, y + BAR_PX + k * LINE_PX, width, LINE_PX)
                    if mx > width / 2:
                        painter.drawText(row.adjusted(0, 0, mx - 4 - width - 4, 0),
                                         Qt.AlignRight | Qt.AlignVCenter, text)
                    else:
                        painter.drawText(row.adjusted(mx, 0, 0, 0), Qt.AlignLeft | Qt.AlignVCenter, text)
                y += len(self.others) * LINE_PX
            y += BAR_PX + GAP_PX
        x = 4.0
        for segment in ("arena", "runtime RAM", "model file", "runtime code", "free"):
            painter.fillRect(QRectF(x, y + 4, 10, 10), QColor(COLORS[segment]))
            painter.setPen(QColor("#222"))
            text_w = painter.fontMetrics().horizontalAdvance(segment)
            painter.drawText(QRectF(x + 13, y, text_w + 2, LINE_PX), Qt.AlignLeft | Qt.AlignVCenter, segment)
            x += 13 + text_w + 12
        painter.end()
