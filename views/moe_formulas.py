"""The MoE lab's closed forms with the run's numbers substituted (engines/labs/moe/formulas.py
computes the (formula, substituted) pairs; this panel only shows them), in the formula
panel's frame, scrolled when they do not fit."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QScrollArea

from inferlab.views.formula_panel import FormulaPanel

EMPTY = "<h3>Closed forms</h3><p><i>They show with the numbers once a step has run.</i></p>"


def formulas_html(pairs) -> str:
    """(formula, substituted) pairs as the panel's HTML: each formula in bold, its numbers
    under it."""
    if not pairs:
        return EMPTY
    rows = "".join(f"<p><b>{html.escape(f)}</b><br>{html.escape(s)}</p>" for f, s in pairs)
    return "<h3>Closed forms</h3>" + rows


class MoEFormulas(QScrollArea):
    """A FormulaPanel (its frame and wrapping) in a scroll area."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.panel = FormulaPanel()
        self.panel.setMinimumWidth(0)
        self.setWidget(self.panel)
        self.setWidgetResizable(True)
        self.pairs: list[tuple[str, str]] = []
        self.show_pairs([])

    def show_pairs(self, pairs) -> None:
        self.pairs = list(pairs)
        self.panel.setText(formulas_html(self.pairs))
