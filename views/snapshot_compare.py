"""Two snapshots compared (engines.trace.compare's `Comparison`): what makes the runs not the
same experiment first (host facts, settings, labs on one side only), then every figure both
hold — A, B, B − A, B / A — each lab's headline figures first (in bold, by their label and
unit, B / A marked better in green or worse in red by the figure's direction), then the rest,
the furthest moved first; filterable by name or label."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QLabel, QLineEdit, QVBoxLayout, QWidget

from inferlab.engines.trace.compare import Comparison, FigureRow, format_figure
from inferlab.views.fact_table import FactTable

HEADERS = ("lab", "figure", "unit", "A", "B", "B − A", "B / A")
VERDICT_COLORS = {"better": "#007A4D", "worse": "#C0392B"}


class SnapshotCompareView(QWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(self.summary.textFormat().RichText)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("filter figures by name or label, e.g. ttft or "
                                       "throughput")
        self.filter.setClearButtonEnabled(True)
        self.table = FactTable(HEADERS)
        self.table.setWordWrap(False)  # one line a figure, however narrow B / A starts
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.filter)
        layout.addWidget(self.table, 1)
        self.comparison: Comparison | None = None
        self.filter.textChanged.connect(lambda _text: self._fill())

    def render(self, comparison: Comparison, a_name: str = "A", b_name: str = "B") -> None:
        self.comparison = comparison
        self.summary.setText(summary_html(comparison, a_name, b_name))
        self._fill()

    def _fill(self) -> None:
        if self.comparison is None:
            return
        needle = self.filter.text().strip().lower()
        rows = [r for r in self.comparison.rows
                if not needle or needle in f"{r.lab}:{r.figure} {r.label or ''}".lower()]
        self.table.set_rows(table_row(r) for r in rows)
        ratio = HEADERS.index("B / A")
        right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        for i, r in enumerate(rows):
            for column in range(HEADERS.index("A"), ratio):  # numbers line up on the right
                self.table.item(i, column).setTextAlignment(right)
            if r.headline:
                item = self.table.item(i, 1)
                font = item.font()
                font.setBold(True)
                item.setFont(font)
            if r.verdict:
                self.table.item(i, ratio).setForeground(
                    QBrush(QColor(VERDICT_COLORS[r.verdict])))


def table_row(r: FigureRow) -> tuple:
    """A row's cells: a headline by its label (its dotted name, for --fail-if, and its
    direction on hover), any other figure by its dotted name."""
    cells = (r.lab, r.label if r.headline else r.figure, r.unit or "", format_figure(r.a),
             format_figure(r.b), format_figure(r.b_minus_a), r.ratio_text())
    if not r.headline:
        return cells
    better = f"; {r.better} is better" if r.better else ""
    return (*cells, {"tip": f"{r.lab}:{r.figure}{better}"})


def summary_html(c: Comparison, a_name: str, b_name: str) -> str:
    import html

    def e(text) -> str:
        return html.escape(str(text))

    lines = [f"<b>A</b> = {e(a_name)}, <b>B</b> = {e(b_name)}"]
    if c.host:
        lines.append("<b>Host facts differ</b> (not the same machine or build): " + "; ".join(
            f"{e(d.name)}: {e(d.a)} → {e(d.b)}" for d in c.host))
    else:
        lines.append("Same host facts and InferLab version.")
    if c.settings:
        lines.append("<b>Settings differ:</b> " + "; ".join(
            f"{e(d.where)}: {e(d.name)}: {e(d.a)} → {e(d.b)}" for d in c.settings))
    for side, labs in (("A", c.only_in_a), ("B", c.only_in_b)):
        if labs:
            lines.append(f"Only in {side}: {e(', '.join(labs))}")
    if not c.labs:
        lines.append("<b>No lab is in both snapshots</b>: no figure to compare.")
    return "<br>".join(lines)
