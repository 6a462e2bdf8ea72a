"""`SteppedView.step_shortcuts`: the keys the stepped labs share (KV, batching, speculative)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut

from inferlab.views.batching_view import BatchingView
from inferlab.views.kv_view import KVView
from inferlab.views.speculative_view import SpeculativeView
from inferlab.views.stepped_controls import SteppedView


def _keys(view) -> dict[str, Qt.ShortcutContext]:
    return {s.key().toString(): s.context() for s in view.findChildren(QShortcut)}


def test_space_n_and_ctrl_r_emit_run_step_and_reset(qtbot):
    view = SteppedView()
    qtbot.addWidget(view)
    view.step_shortcuts()
    assert _keys(view) == {k: Qt.WidgetWithChildrenShortcut for k in ("Space", "N", "Ctrl+R")}
    emitted = []
    view.run_toggled.connect(lambda: emitted.append("run"))
    view.step_requested.connect(lambda: emitted.append("step"))
    view.reset_requested.connect(lambda: emitted.append("reset"))
    by_key = {s.key(): s for s in view.findChildren(QShortcut)}
    for key in ("N", "Space", "Ctrl+R"):
        by_key[QKeySequence(key)].activated.emit()
    assert emitted == ["step", "run", "reset"]


def test_the_three_stepped_views_carry_the_same_keys(qtbot):
    for cls in (KVView, BatchingView, SpeculativeView):
        view = cls()
        qtbot.addWidget(view)
        assert _keys(view) == {k: Qt.WidgetWithChildrenShortcut
                               for k in ("Space", "N", "Ctrl+R")}, cls.__name__
