"""The op table of the step lab: one row per op name and shapes (`OpRow`, from a profiled
step or from a trace), most time first — calls, time, FLOPs, bytes, achieved FLOP/s and
bytes/s, and the share of its time the roof accounts for (t_roof / t). An op not costed shows
its time only, and its row says why."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from inferlab.engines.labs.step.op_rows import OpRow
from inferlab.views.axes import si_label

COLUMNS = ("Series", "Op", "Calls", "Time (µs)", "FLOPs", "Bytes", "FLOP/s", "Bytes/s",
           "% of roof", "Shapes")
NOT_COSTED = "—"
MAX_ROWS = 2000
"""Rows drawn; a trace may hold many thousands of names and shapes (the rest are the
fastest)."""


def _number(value: float | None) -> str:
    return NOT_COSTED if value is None else si_label(value)


def row_cells(row: OpRow) -> list[str]:
    """The table's cells of one row, as shown."""
    of_roof = row.of_roof
    return [row.series, row.name, f"{row.calls:,}", f"{row.time_s * 1e6:,.1f}",
            _number(row.flops), _number(row.bytes), _number(row.flops_per_s),
            _number(row.bytes_per_s), NOT_COSTED if of_roof is None else f"{of_roof:.0%}",
            row.shapes]


class _Number(QTableWidgetItem):
    """A cell that sorts by its number, not its text."""

    def __init__(self, text: str, value: float) -> None:
        super().__init__(text)
        self.value = value

    def __lt__(self, other) -> bool:
        if isinstance(other, _Number):
            return self.value < other.value
        return super().__lt__(other)


def _sort_value(row: OpRow, column: int) -> float | None:
    return {2: row.calls, 3: row.time_s, 4: row.flops, 5: row.bytes, 6: row.flops_per_s,
            7: row.bytes_per_s, 8: row.of_roof}.get(column)


class OpTable(QTableWidget):
    """Draws a sequence of `OpRow` (`draw`); the series column hides for one series."""

    def __init__(self, parent=None):
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(COLUMNS))
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.Interactive)
        header.setStretchLastSection(True)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.setMinimumSize(240, 120)
        self.rows: tuple[OpRow, ...] = ()

    def draw(self, rows: Sequence[OpRow]) -> None:
        self.rows = tuple(sorted(rows, key=lambda r: -r.time_s)[:MAX_ROWS])
        self.setSortingEnabled(False)
        self.setRowCount(len(self.rows))
        for r, row in enumerate(self.rows):
            tip = row.note or f"{row.name} {row.shapes}"
            for c, text in enumerate(row_cells(row)):
                value = _sort_value(row, c)
                item = _Number(text, -1.0 if value is None else float(value)) \
                    if c in (2, 3, 4, 5, 6, 7, 8) else QTableWidgetItem(text)
                if c >= 2 and c <= 8:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                item.setToolTip(tip)
                self.setItem(r, c, item)
        self.setSortingEnabled(True)
        self.sortItems(3, Qt.DescendingOrder)  # most time first
        self.setColumnHidden(0, len({row.series for row in self.rows}) <= 1)
        self.resizeColumnsToContents()
        self.setColumnWidth(1, min(self.columnWidth(1), 220))
