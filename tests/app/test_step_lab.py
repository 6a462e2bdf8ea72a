"""The step lab in the window: its worker profiles the tiny model's decode step under eager
and native, the view draws each execution's ops, split and lanes; a snapshot reopens it
read-only with the same drawing; a torch.profiler trace opens in the Trace tab with progress
against a preset's roof, and reopens from a snapshot; `inferlab screenshot --lab step`
renders."""

from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from tests.app import lab_helpers
from tests.app.lab_helpers import wait_idle

SETTINGS = {"model": "tiny", "batch": 2, "context": 8, "repeats": 1, "threads": 1,
            "executions": ["eager", "native"]}


def open_lab(qtbot, make_window):
    window = make_window()
    lab = window.lab("step")
    lab._settings = lab._settings | SETTINGS
    lab.view.form.set_settings(lab._settings)
    window.show_lab("step")
    qtbot.waitUntil(lambda: lab.info is not None, timeout=120000)
    lab_helpers.wait_idle(qtbot, window, 120000)
    return window, lab


def test_lab_profiles_draws_exports_and_reopens_read_only(qtbot, make_window, tmp_path):
    window, lab = open_lab(qtbot, make_window)
    view = lab.view
    assert [r.execution for r in lab.executions] == ["eager", "native"]
    assert view.executions == tuple(lab.executions)
    # the split: one stack per execution, its three parts the record's, in ms
    for i, r in enumerate(lab.executions):
        assert view.split.stacks[i].tolist() == pytest.approx(
            [r.split.at_roof_s * 1e3, r.split.inside_ops_s * 1e3, r.split.between_ops_s * 1e3])
    # the timeline: a row per lane of each execution, eager's thread first
    assert view.timeline.rows[0] == ("eager", "thread 0")
    assert ("native", "native decoder") in view.timeline.rows
    # the table: every op of both executions, its calls summed per name and shapes
    assert sum(row.calls for row in view.ops.rows) == sum(len(r.ops) for r in lab.executions)
    assert {row.series for row in view.ops.rows} == {"eager", "native"}
    assert view.ops.rowCount() == len(view.ops.rows)
    assert set(view.roofline.dots) == {"eager", "native"}
    assert "between ops" in view.status.text() and "tiny" in view.status.text()

    path = window.export_snapshot(tmp_path / "step.json")
    raw = json.loads(path.read_text())
    section = raw["inferlab"]["labs"]["step"]
    # Perfetto: each execution's step a span, each of its ops one too
    names = [e.get("name") for e in raw["traceEvents"] if e.get("cat") == "op"]
    assert names.count("aten::scaled_dot_product_attention") == 2  # eager's, tiny: 2 layers
    assert {"eager step", "native step"} <= {e.get("name") for e in raw["traceEvents"]}
    assert [e["execution"] for e in section["state"]["executions"]] == ["eager", "native"]
    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    replay = other.lab("step")
    assert replay.read_only and not replay.view.form.run_button.isEnabled()
    assert not replay.view.trace.open_button.isEnabled()
    assert replay.view.executions == tuple(lab.executions)
    assert replay.view.split.stacks.tolist() == view.split.stacks.tolist()
    assert replay.view.ops.rows == view.ops.rows
    assert "Read-only snapshot" in replay.view.status.text()
    other.show_live()  # live again: the lab starts its own first run (cancelled here)
    assert not replay.read_only and replay.view.form.model.isEnabled()
    replay.cancel()
    wait_idle(qtbot, other, 120000)


def test_a_trace_opens_against_a_preset(qtbot, make_window, tmp_path):
    x, w = torch.randn(8, 64), torch.randn(64, 32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            torch.mm(x, w).relu()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    window, lab = open_lab(qtbot, make_window)
    tab = lab.view.trace
    tab.roof.setCurrentIndex(tab.roof.findData("h100-sxm"))
    messages = []
    window.context.task_progress.connect(lambda name, f, m: messages.append((name, f, m)))
    tab.open_requested.emit(str(trace))
    qtbot.waitUntil(lambda: lab.trace is not None, timeout=60000)
    wait_idle(qtbot, window)
    profile_read = lab.trace
    assert profile_read.roof.name == "h100-sxm"
    assert any(name == "Step lab: read a trace" and f > 0 for name, f, _m in messages)
    mm = [p for p in profile_read.ops if p.name == "aten::mm"]
    assert len(mm) == 1 and mm[0].calls == 3 and mm[0].flops == 3 * 2 * 8 * 64 * 32
    assert tab.profile is profile_read and lab.view.tabs.currentWidget() is tab
    assert tab.kernels.rowCount() == len(profile_read.kernels)
    assert [row.name for row in tab.ops.rows] == [p.name for p in profile_read.ops]
    assert tab.breakdown.lanes and "trace.json" in tab.status.text()
    # a roof changed reads the trace again against it
    tab.roof.setCurrentIndex(tab.roof.findData("a100-80gb"))
    qtbot.waitUntil(lambda: lab.trace is not profile_read, timeout=60000)
    wait_idle(qtbot, window)
    assert lab.trace.roof.name == "a100-80gb"
    # the open trace goes into the snapshot and reopens read-only, drawn the same
    path = window.export_snapshot(tmp_path / "with_trace.json")
    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    replay = other.lab("step")
    assert replay.read_only and replay.view.trace.profile == lab.trace
    assert replay.view.trace.ops.rows == tab.ops.rows
    assert not replay.view.trace.open_button.isEnabled()


def test_a_bad_trace_is_named_in_the_tab(qtbot, make_window, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": 3}]}')
    window, lab = open_lab(qtbot, make_window)
    lab.open_trace(str(bad))
    qtbot.waitUntil(lambda: "Failed" in lab.view.trace.status.text(), timeout=60000)
    wait_idle(qtbot, window)
    assert "bad.json" in lab.view.trace.status.text() and lab.trace is None


@pytest.mark.slow  # a whole-window screenshot, SmolLM2 profiled when installed
def test_screenshot_of_the_lab(tmp_path):
    from PySide6.QtGui import QImage

    from inferlab.app.cli import main

    png = tmp_path / "step.png"
    assert main(["screenshot", "--lab", "step", "--out", str(png)]) == 0
    image = QImage(str(png))
    assert (image.width(), image.height()) == (1280, 800)
