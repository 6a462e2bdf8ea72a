"""`SteppedView`: the controls every stepped lab shares (attention, KV, batching,
speculative) — buttons and keys emitting the lab's signals, Run↔Pause, Step off while running
and in a snapshot, the status line, the replay slider and its label."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut

from inferlab.views.attention_view import AttentionView
from inferlab.views.batching_view import BatchingView
from inferlab.views.kv_view import KVView
from inferlab.views.speculative_view import SpeculativeView
from inferlab.views.stepped_controls import SteppedView

KEYS = {k: Qt.WidgetWithChildrenShortcut for k in ("Space", "N", "Ctrl+R")}


class Steps(SteppedView):
    """A view of numbered steps: what `show_step` was asked to draw."""

    def __init__(self):
        super().__init__()
        self.build_controls("tile", "reset tip", "step tip", "run tip", "slider tip", 50)
        self.shown: list[int] = []

    def draw(self, n_steps: int, index: int | None = None) -> None:
        self.show_step(self.follow(n_steps, index))

    def show_step(self, index: int) -> None:
        self.shown.append(index)
        self.step_label.setText(f"tile {index}")


def _keys(view) -> dict[str, Qt.ShortcutContext]:
    return {s.key().toString(): s.context() for s in view.findChildren(QShortcut)}


def _signals(view) -> list[str]:
    emitted = []
    view.run_toggled.connect(lambda: emitted.append("run"))
    view.step_requested.connect(lambda: emitted.append("step"))
    view.reset_requested.connect(lambda: emitted.append("reset"))
    return emitted


def test_buttons_and_keys_emit_the_labs_signals(qtbot):
    view = Steps()
    qtbot.addWidget(view)
    assert [b.text() for b in view.buttons] == ["Reset", "Step", "Run"]
    assert [b.toolTip() for b in view.buttons] == ["reset tip", "step tip", "run tip"]
    emitted = _signals(view)
    view.step_button.click()
    view.run_button.click()
    view.reset_button.click()
    assert emitted == ["step", "run", "reset"]
    assert _keys(view) == KEYS
    by_key = {s.key(): s for s in view.findChildren(QShortcut)}
    for key in ("N", "Space", "Ctrl+R"):
        by_key[QKeySequence(key)].activated.emit()
    assert emitted == ["step", "run", "reset"] * 2


def test_run_turns_to_pause_and_step_is_off_while_running_or_read_only(qtbot):
    view = Steps()
    qtbot.addWidget(view)
    assert view.run_button.text() == "Run" and view.step_button.isEnabled()
    view.set_running(True)
    assert view.run_button.text() == "Pause" and not view.step_button.isEnabled()
    view.set_running(False)
    assert view.run_button.text() == "Run" and view.step_button.isEnabled()
    view.set_read_only(True)
    assert view.read_only
    assert not any(b.isEnabled() for b in view.buttons)
    assert view.slider.isEnabled()  # a snapshot replays through the slider
    view.set_running(False)
    assert not view.step_button.isEnabled()
    view.set_read_only(False)
    assert all(b.isEnabled() for b in view.buttons)


def test_the_status_line_is_hidden_when_empty_and_red_for_errors(qtbot):
    view = Steps()
    qtbot.addWidget(view)
    view.show()
    view.set_status("ready")
    assert view.status.isVisible() and view.status.text() == "ready"
    assert "#555" in view.status.styleSheet()
    view.set_status("it broke", error=True)
    assert "#B71C1C" in view.status.styleSheet()
    view.set_status("")
    assert not view.status.isVisible()


def test_the_slider_follows_the_latest_step_until_moved_back(qtbot):
    view = Steps()
    qtbot.addWidget(view)
    assert (view.slider.minimum(), view.slider.maximum()) == (0, 0)
    assert view.step_label.text() == "tile —"
    view.slider.setValue(0)  # nothing drawn: nothing to show
    assert view.shown == []
    view.draw(5)
    assert (view.slider.maximum(), view.slider.value(), view.index) == (4, 4, 4)
    assert view.shown == [4]  # drawn once: the slider's move did not draw again
    view.draw(8)  # at the latest: it follows
    assert (view.slider.maximum(), view.slider.value(), view.shown[-1]) == (7, 7, 7)
    view.slider.setValue(2)  # the user looks back ...
    assert view.shown[-1] == 2 and view.index == 2 and view.step_label.text() == "tile 2"
    view.draw(12)  # ... and stays there as steps come
    assert (view.slider.maximum(), view.slider.value(), view.shown[-1]) == (11, 2, 2)
    view.draw(12, index=6)  # a step asked for
    assert (view.slider.value(), view.shown[-1]) == (6, 6)
    view.slider.setValue(11)  # back at the latest: following again
    view.draw(13)
    assert (view.slider.value(), view.shown[-1]) == (12, 12)
    n_shown = len(view.shown)
    view.clear_steps()
    assert (view.slider.maximum(), view.index) == (0, -1)
    assert view.step_label.text() == "tile —" and len(view.shown) == n_shown
    view.draw(3)  # a new run starts at its latest step
    assert view.shown[-1] == 2


def test_the_four_stepped_views_carry_the_same_controls(qtbot):
    for cls in (AttentionView, KVView, BatchingView, SpeculativeView):
        view = cls()
        qtbot.addWidget(view)
        assert _keys(view) == KEYS, cls.__name__
        assert [b.text() for b in view.buttons] == ["Reset", "Step", "Run"], cls.__name__
        view.set_read_only(True)
        assert not any(b.isEnabled() for b in view.buttons), cls.__name__
        view.set_read_only(False)
        assert all(b.isEnabled() for b in view.buttons), cls.__name__
