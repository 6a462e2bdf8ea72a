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


def test_the_token_stream_shows_its_end_once_laid_out_until_the_user_scrolls(qtbot):
    """A run drawn before the window shows (a snapshot being opened) opens at its last
    step, not at the prompt; once the user scrolls, a new layout leaves the view alone."""
    from inferlab.engines.labs.speculative.session import speculative_session
    from inferlab.engines.labs.speculative.settings import speculative_defaults

    session = speculative_session(speculative_defaults() | {"max_tokens": 160, "k": 3})
    while not session.done:
        session.step()
    view = SpeculativeView()
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.draw(session.header(), session.records)  # before it is shown: no layout yet
    view.show()
    qtbot.waitExposed(view)
    bar = view.stream.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    bar.triggerAction(bar.SliderAction.SliderToMinimum)  # the user scrolls to the top
    assert bar.value() == 0
    view.resize(700, 700)  # a new layout: the user's place is kept
    qtbot.wait(50)
    assert bar.value() == 0
