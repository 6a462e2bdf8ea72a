"""A two-column table of named facts (device properties, results)."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem


class FactTable(QTableWidget):
    """Rows of (name, value[, tooltip]); values are preformatted strings with units."""

    def __init__(self, headers=("Property", "Value"), parent=None):
        super().__init__(0, len(headers), parent)
        self.setHorizontalHeaderLabels(list(headers))
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.setAlternatingRowColors(True)
        header = self.horizontalHeader()
        for column in range(len(headers) - 1):
            header.setSectionResizeMode(column, QHeaderView.ResizeToContents)
        header.setStretchLastSection(True)

    def set_rows(self, rows) -> None:
        """`rows`: iterable of tuples (cells..., [tooltip as a dict {'tip': str}])."""
        rows = list(rows)
        self.setRowCount(len(rows))
        for r, row in enumerate(rows):
            tip = ""
            if row and isinstance(row[-1], dict):
                tip = row[-1].get("tip", "")
                row = row[:-1]
            for c, value in enumerate(row):
                item = QTableWidgetItem(str(value))
                if tip:
                    item.setToolTip(tip)
                self.setItem(r, c, item)
        self.resizeRowsToContents()
