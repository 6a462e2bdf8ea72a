"""`inferlab run LAB`: headless lab runs that write snapshots the window opens."""

from __future__ import annotations

import dataclasses
import json

import pytest

from inferlab.app.cli import main
from inferlab.app.labs.registry import lab_spec, resolve
from inferlab.engines.labs.mcu.section import read_mcu_section
from inferlab.engines.labs.memory.session import memory_plans
from inferlab.engines.mcu.examples import examples_dir
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.op_costs import op_macs
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.trace.snapshot import read_snapshot
from tests.engines.model.test_config import LLAMA3_8B_HF

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


def _record(lab: str, path):
    """The lab's section in the snapshot at `path`, read by its registry reader."""
    return resolve(lab_spec(lab).read_section)(read_snapshot(path).labs[lab])


def test_run_hardware_roofline_memory_write_what_the_window_shows(capsys, tmp_path,
                                                                  make_window):
    paths = {lab: tmp_path / f"{lab}.json" for lab in ("hardware", "roofline", "memory")}
    assert main(["run", "hardware", "--samples", "2", "--snapshot", str(paths["hardware"]),
                 "--json"]) == 0
    hw_metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert main(["run", "roofline", "--preset", "h100-sxm", "--dtype", "bf16", "--snapshot",
                 str(paths["roofline"])]) == 0
    assert "peak_flops: fp32" in capsys.readouterr().out
    assert main(["run", "memory", "--model", "llama-3-8b", "--context", "4096", "--batch", "8",
                 "--tp", "2", "--snapshot", str(paths["memory"]), "--json"]) == 0
    mem_metrics = json.loads(capsys.readouterr().out)["metrics"]

    hardware = _record("hardware", paths["hardware"])
    assert hardware.settings == {"sample_hz": 10.0, "device": "cpu"}
    assert hardware.shown_device()["id"] == "cpu" and hardware.telemetry.t_s.size == 2
    assert hardware.roofs["cpu"].peak_flops == hw_metrics["peak_flops"]
    roofline = _record("roofline", paths["roofline"])
    assert (roofline.settings["presets"], roofline.settings["dtype"]) == (["h100-sxm"], "bf16")
    assert roofline.model_config.name == load_model_preset("smollm2-135m").name
    assert roofline.points and all("bf16" in p.name for p in roofline.points)
    memory = _record("memory", paths["memory"])
    assert (memory.settings["context"], memory.settings["batch"], memory.settings["tp"]) == \
        (4096, 8, 2)
    assert memory.target["id"] == "h100-sxm"
    plan, _variants = memory_plans(memory.settings, memory.model_config, memory.target)
    assert plan.kv_bytes_total == mem_metrics["kv_bytes_total"] == 4096 * 8 * 131072 // 2
    for record in (hardware, roofline, memory):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.settings = {}

    window = make_window()
    labs = {lab: window.lab(lab) for lab in paths}
    for lab, path in paths.items():
        labs[lab].show_snapshot(_record(lab, path))  # the record, as restore_labs hands it
        assert labs[lab].read_only
    assert labs["hardware"].view.roofs_note.text() == "Measured on cpu."
    assert labs["hardware"].view.roofs_table.rowCount() == \
        2 * len(hardware.roofs["cpu"].peak_flops) + 1
    scene = labs["roofline"].view.plot.scene_record
    assert [roof.label for roof in scene.roofs] == [f"cpu measured ({roofline.roof_dtype()})",
                                                    "NVIDIA H100 SXM5 80GB (datasheet)"]
    assert sum(p.measured for p in scene.points) == len(roofline.points)
    assert labs["memory"].view.batch.value() == 8 and not labs["memory"].view.batch.isEnabled()


def test_run_roofline_and_memory_errors_name_the_option(capsys, tmp_path):
    out = tmp_path / "x.json"
    assert main(["run", "roofline", "--dtype", "fp99", "--snapshot", str(out)]) == 2
    assert "--dtype: expected one of" in capsys.readouterr().err
    assert main(["run", "memory", "--context", "0", "--snapshot", str(out)]) == 2
    assert "--context: expected an integer in 1..10,000,000" in capsys.readouterr().err
    assert main(["run", "memory", "--target", "cortex-m4-80mhz", "--snapshot", str(out)]) == 2
    assert "--target: cortex-m4-80mhz is a" in capsys.readouterr().err
    assert main(["run", "memory", "--model", "no-such-model", "--snapshot", str(out)]) == 2
    assert "--model:" in capsys.readouterr().err
    assert not out.exists()


def test_an_imported_config_is_named_alike_by_the_window_and_the_run(tmp_path, make_window):
    """`inferlab run memory --model F.json` stores the model id the window's Import gives F,
    so its snapshot opens with the same model chosen."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA3_8B_HF), encoding="utf-8")
    out = tmp_path / "m.json"
    assert main(["run", "memory", "--model", str(config), "--snapshot", str(out)]) == 0
    memory = _record("memory", out)
    lab = make_window().lab("memory")
    assert lab.import_config(config) == memory.settings["model"] == \
        f"imported:{config.resolve()}"
    assert lab.model_config(memory.settings["model"]) == memory.model_config
