"""Two snapshots compared (engines.trace.compare's `Comparison`): what makes the runs not the
same experiment first (host facts, settings, labs on one side only), then every figure both
hold — A, B, B − A, B / A, the furthest moved first — filterable by name."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QLineEdit, QVBoxLayout, QWidget

from inferlab.engines.trace.compare import Comparison, format_figure, format_ratio
from inferlab.views.fact_table import FactTable

HEADERS = ("lab", "figure", "A", "B", "B − A", "B / A")


class SnapshotCompareView(QWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(self.summary.textFormat().RichText)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("filter figures by name, e.g. ttft or tokens_per_s")
        self.filter.setClearButtonEnabled(True)
        self.table = FactTable(HEADERS)
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
                if not needle or needle in f"{r.lab}:{r.figure}".lower()]
        self.table.set_rows((r.lab, r.figure, format_figure(r.a), format_figure(r.b),
                             format_figure(r.b_minus_a), format_ratio(r.b_over_a))
                            for r in rows)


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
