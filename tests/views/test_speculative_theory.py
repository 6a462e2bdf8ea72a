"""The theory plot's line for a trained head: E(K) = 1 + a1 + a1·a2 + … from the head's own
held-out per-position acceptance, for a chain of K drafts only."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.speculative.records import SpeculativeHeader
from inferlab.views.speculative_view import SpeculativeView


def _header(k, accept, width=1):
    return SpeculativeHeader("tiny", "eagle", k, (1, 2, 3), {}, 1, width, accept)


@pytest.mark.parametrize(("k", "accept", "width", "expected"), [
    (2, (0.5, 0.4, 0.9), 1, 1 + 0.5 + 0.5 * 0.4),
    (3, (0.5, 0.4, 0.9), 1, 1 + 0.5 + 0.2 + 0.2 * 0.9),
    (4, (0.5, 0.4, 0.9), 1, None),  # measured at 3 positions: no prediction for K = 4
    (2, (0.5, 0.4), 3, None),  # a tree: not a chain's positions
    (2, (), 1, None),  # a drafter with no head
])
def test_the_heads_line(qtbot, k, accept, width, expected):
    view = SpeculativeView()
    qtbot.addWidget(view)
    view.draw(_header(k, accept, width), ())
    _, y = view.head_line.getData()
    labels = [label.text for _, label in view.theory_legend.items]
    if expected is None:
        assert y is None or len(y) == 0
        assert not any("head" in text for text in labels)
    else:
        assert list(y) == pytest.approx([expected, expected])
        assert f"the head's held-out acceptance: E = {expected:.2f}" in labels
    view.draw(_header(k, (), width), ())  # then a drafter with no head: the entry leaves
    assert not any("head" in label.text for _, label in view.theory_legend.items)
