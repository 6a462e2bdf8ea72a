"""The batching lab's Trace tab: Open trace… reads the file in a worker and draws its stats."""

from __future__ import annotations

import pytest

from inferlab.engines.serve.traces.bench import write_mooncake_jsonl
from inferlab.engines.serve.traces.stream import read_trace
from tests.app import lab_helpers
from tests.app.lab_helpers import wait_idle


def test_open_trace_reads_in_a_worker_and_draws(qtbot, make_window, tmp_path):
    window, lab = lab_helpers.open_lab(qtbot, make_window, "batching", 60000, requests=10)
    wait_idle(qtbot, window)
    path = tmp_path / "m.jsonl"
    n = write_mooncake_jsonl(path, duration_s=10.0)
    lab.view.trace.open_requested.emit(str(path))
    assert not lab.view.trace.button.isEnabled()  # busy while the worker reads
    qtbot.waitUntil(lambda: lab.view.trace.stats is not None, timeout=30000)
    wait_idle(qtbot, window)
    assert lab.view.trace.stats.requests == n
    assert lab.view.trace.button.isEnabled()
    assert f"{n:,} requests read" in lab.view.trace.status.text()
    assert "m.jsonl (mooncake)" in lab.view.trace.summary.text()


def test_a_bad_trace_says_why(qtbot, make_window, tmp_path):
    window, lab = lab_helpers.open_lab(qtbot, make_window, "batching", 60000, requests=10)
    wait_idle(qtbot, window)
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 1, "input_length": "x", "output_length": 2}\n')
    lab.view.trace.open_requested.emit(str(path))
    qtbot.waitUntil(lambda: "failed" in lab.view.trace.status.text(), timeout=30000)
    wait_idle(qtbot, window)
    assert "input_length" in lab.view.trace.status.text()
    assert lab.view.trace.stats is None


def test_the_lab_runs_on_the_open_trace(qtbot, make_window, tmp_path):
    window, lab = lab_helpers.open_lab(qtbot, make_window, "batching", 60000, requests=10)
    wait_idle(qtbot, window)
    seeded = [r.arrival_s for r in lab.requests]
    path = tmp_path / "m.jsonl"
    n = write_mooncake_jsonl(path, duration_s=30.0)
    assert not lab.view.trace.replay.isEnabled()  # nothing open to run on yet
    lab.view.trace.open_requested.emit(str(path))
    qtbot.waitUntil(lambda: lab.view.trace.replay.isEnabled(), timeout=30000)
    lab.view.trace.replay.setChecked(True)
    qtbot.waitUntil(lambda: lab.session is not None and lab.replaying
                    and len(lab.requests) == min(10, n), timeout=30000)
    wait_idle(qtbot, window)
    first = [r.arrival_s for r in read_trace(path)][:10]
    assert [r.arrival_s for r in lab.requests] == pytest.approx(first)
    assert "m.jsonl (mooncake" in lab.ready_text()
    lab.view.trace.replay.setChecked(False)  # back to the seeded workload
    qtbot.waitUntil(lambda: [r.arrival_s for r in lab.requests] == seeded, timeout=30000)
    wait_idle(qtbot, window)
