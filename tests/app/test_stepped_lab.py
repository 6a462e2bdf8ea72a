"""The stepped-lab base on a counting engine: step, run, pause, reset mid-run, throttled
drawing, thinning, replay, and `busy()`."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import QPushButton, QWidget

from inferlab.app.context import AppContext
from inferlab.app.labs.stepped import SteppedLab
from inferlab.engines.trace.snapshot import lab_section


@dataclasses.dataclass(frozen=True)
class CountRecord:
    step: int
    detail: tuple | None


@dataclasses.dataclass(frozen=True)
class CountSnapshot:
    """The count lab's snapshot record: what its reader makes of a section, read once."""

    settings: dict
    header: dict | None
    records: tuple[CountRecord, ...]


def read_count_section(section: dict) -> CountSnapshot:
    state = section["state"]
    if not state:
        return CountSnapshot(section["settings"], None, ())
    return CountSnapshot(section["settings"], state["header"],
                         tuple(CountRecord(**r) for r in state["records"]))


class CountSession:
    """Counts to `n`; each step waits for `gate` when given (so a test can hold a run): an
    Event (open or shut) or a Semaphore (one permit per step)."""

    def __init__(self, n: int, gate=None):
        self.n, self.step_index, self.gate = n, 0, gate
        self.blocked = threading.Event()  # a step is waiting for its permit

    @property
    def done(self) -> bool:
        return self.step_index >= self.n

    def step(self) -> CountRecord:
        if isinstance(self.gate, threading.Event):
            self.gate.wait(10)
        elif self.gate is not None:
            self.blocked.set()
            assert self.gate.acquire(timeout=10), "the test gave no permit for this step"
            self.blocked.clear()
        self.step_index += 1
        return CountRecord(self.step_index, tuple(range(4)))


class FakeView(QWidget):
    settings_changed = Signal(dict)
    step_requested = Signal()
    run_toggled = Signal()
    reset_requested = Signal()

    def __init__(self):
        super().__init__()
        self.step_button = QPushButton(self)
        self.status, self.running, self.read_only, self.settings = "", False, False, {}

    def set_settings(self, s):
        self.settings = dict(s)

    def set_status(self, text, error=False):
        self.status = text

    def set_running(self, running):
        self.running = running

    def set_read_only(self, read_only):
        self.read_only = read_only

    def clear(self, message=""):
        self.status = message


class CountLab(SteppedLab):
    lab_id = "kv"  # borrows a registered id for its title; nothing else of the KV lab is used
    task_name = "Count lab"
    defaults = {"n": 5}
    auto_steps = 2
    gate = None

    def __init__(self, context):
        super().__init__(context, FakeView())
        self.draws: list[int] = []

    def open_session(self, settings, device, progress):
        return CountSession(int(settings["n"]), self.gate)

    def header_of(self, session):
        return {"n": session.n}

    def draw(self, header, records):
        self.draws.append(len(records))

    def thin_history(self):
        if len(self.records) > 3:  # keep detail on the last three records only
            old = self.records[-4]
            self.records[-4] = dataclasses.replace(old, detail=None)

    def replay_parts(self, record: CountSnapshot):
        return record.settings, record.header, list(record.records)

    def snapshot_section(self):
        state = {"header": self.header,
                 "records": [dataclasses.asdict(r) for r in self.records]} if self.header else {}
        return lab_section(self.settings(), state, {})


@pytest.fixture
def lab(qtbot, tmp_path):
    context = AppContext(settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat),
                         quick=True)
    made = CountLab(context)
    qtbot.addWidget(made.view)
    yield made
    made.shutdown()
    context.cancel_tasks()
    context.wait_for_tasks(5000)


def idle(qtbot, lab):
    qtbot.waitUntil(lambda: not lab.busy(), timeout=30000)


def test_opens_with_auto_steps_then_steps_and_runs_to_the_end(qtbot, lab):
    lab.activated()
    assert lab.busy()
    idle(qtbot, lab)
    assert [r.step for r in lab.records] == [1, 2]
    lab.step()
    idle(qtbot, lab)
    assert [r.step for r in lab.records] == [1, 2, 3]
    lab.toggle_run()
    idle(qtbot, lab)
    lab.flush()
    assert [r.step for r in lab.records] == [1, 2, 3, 4, 5]
    assert lab.session.done and not lab.view.running
    lab.step()  # past the end: says so, starts nothing
    assert not lab.busy() and "ended" in lab.view.status
    # thinning kept detail on the last three records only
    assert [r.detail is not None for r in lab.records] == [False, False, True, True, True]


def test_drawing_is_throttled_to_the_screen_rate(qtbot, lab):
    lab.defaults = {"n": 200}
    lab._settings = {"n": 200}
    lab.reset(auto_steps=200)
    idle(qtbot, lab)
    lab.flush()
    assert len(lab.records) == 200
    assert lab.draws[-1] == 200
    assert len(lab.draws) < 200  # many records arrived between two frames and were drawn once


def test_pause_stops_a_run_after_the_step_in_progress(qtbot, lab):
    lab.gate = threading.Semaphore(0)  # each step needs a permit: the test holds the run
    lab.defaults = {"n": 1000}
    lab._settings = {"n": 1000}
    lab.reset(auto_steps=0)
    idle(qtbot, lab)
    lab.toggle_run()
    assert lab.view.running
    lab.gate.release(3)
    qtbot.waitUntil(lambda: len(lab.records) == 3 and lab.session.blocked.is_set(), timeout=30000)
    lab.toggle_run()  # pause while the 4th step waits for its permit
    lab.gate.release(1)  # the step in progress completes; the run then stops
    idle(qtbot, lab)
    assert [r.step for r in lab.records] == [1, 2, 3, 4]
    assert not lab.view.running and not lab.session.done
    lab.gate.release(5)
    qtbot.wait(100)
    assert len(lab.records) == 4  # nothing runs while paused


def test_speed_limit_paces_a_run_and_it_still_ends(qtbot, lab):
    lab.set_speed(200.0)
    assert lab.steps_per_s == 200.0
    lab.reset(auto_steps=0)
    idle(qtbot, lab)
    lab.toggle_run()
    idle(qtbot, lab)
    assert [r.step for r in lab.records] == [1, 2, 3, 4, 5]
    lab.set_speed(0)
    assert lab.steps_per_s is None


def test_a_reset_during_a_run_drops_the_old_sessions_records(qtbot, lab):
    lab.gate = threading.Event()
    lab.reset(auto_steps=5)
    old = lab._generation
    lab.reset(auto_steps=1)  # queued behind the running task, which is stopped
    lab.gate.set()
    idle(qtbot, lab)
    qtbot.waitUntil(lambda: lab._generation > old and not lab.busy(), timeout=30000)
    idle(qtbot, lab)
    assert [r.step for r in lab.records] == [1]


def test_snapshot_replays_read_only_and_live_comes_back(qtbot, lab):
    lab.activated()
    idle(qtbot, lab)
    section = lab.snapshot_section()
    other_records = [dataclasses.asdict(CountRecord(i, None)) for i in (1, 2, 3)]
    replay = dict(section, state={"header": {"n": 3}, "records": other_records})
    lab.show_snapshot(read_count_section(replay))
    assert lab.read_only and lab.view.read_only and lab.draws[-1] == 3
    assert lab.view.settings == section["settings"]
    lab.step()  # read-only: ignored
    assert not lab.busy()
    lab.show_live()
    assert not lab.read_only and lab.draws[-1] == 2
    lab.show_snapshot(read_count_section(dict(section, state={})))
    assert lab.view.status.startswith("Read-only snapshot: the lab had not run")


class FinishedFirstContext(AppContext):
    """Returns each task only after its thread has ended: the worst schedule a loaded
    machine can give, where the work is done before the caller connects anything."""

    def run_task(self, *args, **kwargs):
        task = super().run_task(*args, **kwargs)
        task.wait(10000)
        return task


def test_a_task_done_before_run_task_returns_still_ends_the_busy_state(qtbot, tmp_path):
    context = FinishedFirstContext(
        settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat), quick=True)
    made = CountLab(context)
    qtbot.addWidget(made.view)
    made.activated()
    idle(qtbot, made)
    assert [r.step for r in made.records] == [1, 2]
    made.shutdown()
    context.wait_for_tasks(5000)
