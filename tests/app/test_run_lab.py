"""`inferlab run LAB`: headless lab runs that write snapshots the window opens."""

from __future__ import annotations

import dataclasses
import json

import pytest

from inferlab.app.cli import main
from inferlab.engines.labs.mcu.section import read_mcu_section
from inferlab.engines.mcu.examples import examples_dir
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.op_costs import op_macs
from inferlab.engines.trace.snapshot import read_snapshot

MODELS = examples_dir()
HELLO = MODELS / "hello_world_int8.tflite"


def test_run_mcu_writes_a_snapshot_the_window_opens(capsys, tmp_path, make_window):
    out = tmp_path / "hello.json"
    assert main(["run", "mcu", "--model", str(HELLO), "--snapshot", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    # the default comparison, patch-based, needs a CNN stem: noted, not fatal
    assert printed["snapshot"] == str(out) and printed["metrics"]["arena_bytes"] == {"tflm-greedy": 32}

    snapshot = read_snapshot(out)
    assert snapshot.active_lab == "mcu" and list(snapshot.labs) == ["mcu"]
    record = read_mcu_section(snapshot.labs["mcu"])
    settings, state = record.settings, record.state
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.state = None
    model = load_model(HELLO)
    plan = plan_model(model, "tflm-greedy")
    layout = state.layouts[0]
    assert (settings["planner"], settings["board"]) == ("tflm-greedy", "nrf52840")
    assert "no stage to run patch by patch" in state.compare_note
    assert [(t.offset, t.size, t.first, t.last) for t in layout.tensors] == \
        [(o, b.size, b.first, b.last) for b, o in zip(plan.buffers, plan.offsets, strict=True)]
    assert [o.macs for o in state.ops] == [op_macs(model, i) for i in range(len(model.operators))]
    assert state.host_run is not None and len(state.host_run.op_us) == 3
    assert all(o.host_us is not None for o in state.ops)
    # per-op spans for Perfetto
    names = [e["name"] for e in snapshot.trace_events if e.get("ph") == "X"]
    assert "0 FULLY_CONNECTED" in names and "plan" in names and "run on host" in names

    window = make_window()
    window.open_snapshot(out)
    lab = window.lab("mcu")
    assert lab.read_only and window.current_lab() is lab
    shown = lab.view.plots[0].layout_record
    assert shown == layout
    assert lab.view.ops_table.rowCount() == 3
    other = make_window(str(tmp_path / "other.ini")).lab("mcu")
    other.show_snapshot(record)  # the record itself, as restore_labs hands it over
    assert other.read_only and other.view.plots[0].layout_record == layout


def test_run_mcu_options_and_errors(capsys, tmp_path):
    out = tmp_path / "linear.json"
    assert main(["run", "mcu", "--model", str(HELLO), "--planner", "linear", "--compare", "none",
                 "--board", "samd21", "--snapshot", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    state = read_mcu_section(read_snapshot(out).labs["mcu"]).state
    assert [lay.planner for lay in state.layouts] == ["linear"] and state.board.id == "samd21"

    person = tmp_path / "person.json"
    assert main(["run", "mcu", "--model", str(MODELS / "person_detect.tflite"), "--compare",
                 "patch-based", "--snapshot", str(person), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["arena_bytes"] == {"tflm-greedy": 55296, "patch-based": 22496}

    assert main(["run", "mcu", "--model", str(HELLO), "--planner", "nope", "--snapshot", str(out)]) == 2
    assert "--planner 'nope'" in capsys.readouterr().err
    assert main(["run", "mcu", "--model", str(tmp_path / "missing.tflite"), "--snapshot", str(out)]) == 2
    assert "missing.tflite" in capsys.readouterr().err


def test_run_mcu_on_a_model_the_interpreter_cannot_run(capsys, tmp_path):
    model = MODELS / "keyword_scrambled.tflite"
    out = tmp_path / "ks.json"
    assert main(["run", "mcu", "--model", str(model), "--snapshot", str(out)]) == 0
    state = read_mcu_section(read_snapshot(out).labs["mcu"]).state
    assert state.host_run is None and "SVDF" in state.note
    assert state.layouts[0].arena_bytes == 672
