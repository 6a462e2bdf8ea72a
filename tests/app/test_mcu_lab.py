"""The MCU lab, offscreen: SRAM layouts drawn from the plans, budgets, per-op table, host and
virtual-board runs, a board that vanishes, snapshots."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from PySide6.QtCore import QPointF

from inferlab.engines.board.boards import load_board
from inferlab.engines.board.session import PORT, VIRTUAL, BoardChoice
from inferlab.engines.labs.mcu.session import mcu_host_run
from inferlab.engines.labs.mcu.settings import MCU_HOST_REPEATS
from inferlab.engines.mcu.examples import examples_dir
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.op_costs import op_macs
from inferlab.views.mcu_arena import ArenaItem
from inferlab.views.mcu_connect_dialog import ConnectDialog

MODELS = examples_dir()
PERSON = MODELS / "person_detect.tflite"
HELLO = MODELS / "hello_world_int8.tflite"
MICRO = MODELS / "micro_speech_quantized.tflite"


def wait_idle(qtbot, window, timeout_ms=30000):
    """Until no task runs and the MCU lab has handled its last task's result."""
    lab = window.lab("mcu")
    qtbot.waitUntil(lambda: not window.context.running_tasks() and not lab.busy(), timeout=timeout_ms)


@pytest.fixture
def lab_window(qtbot, make_window):
    """A window showing the MCU lab, its first (automatic) host run finished."""
    window = make_window()
    window.show_lab("mcu")
    lab = window.lab("mcu")
    qtbot.waitUntil(lambda: lab.state is not None and lab.state.host_run is not None, timeout=30000)
    wait_idle(qtbot, window)
    yield window, lab
    lab.shutdown()


def choose(combo, key) -> None:
    index = combo.findData(key)
    assert index >= 0, f"{key!r} not among the choices"
    combo.setCurrentIndex(index)


def drawn(plot) -> ArenaItem:
    items = [i for i in plot.getPlotItem().items if isinstance(i, ArenaItem)]
    assert len(items) == 1  # every buffer in ONE item
    return items[0]


def rects(item: ArenaItem) -> list[tuple[float, float, float, float]]:
    return [(r.left(), r.top(), r.width(), r.height()) for r in item._rects]


def test_default_model_draws_one_rectangle_per_planned_buffer(lab_window):
    window, lab = lab_window
    view = lab.view
    assert lab.settings()["model"] == str(PERSON)
    assert (lab.settings()["planner"], lab.settings()["compare"], lab.settings()["board"]) == \
        ("tflm-greedy", "patch-based", "nrf52840")
    model = load_model(PERSON)
    for plot, planner, count, arena in zip(view.plots, ("tflm-greedy", "patch-based"), (32, 137),
                                           (55296, 22496), strict=True):
        plan = plan_model(model, planner)
        item = drawn(plot)
        assert len(item._rects) == len(plan.buffers) == count
        assert rects(item) == [(b.first, o, b.last + 1 - b.first, b.size)
                               for b, o in zip(plan.buffers, plan.offsets, strict=True)]
        assert item.boundingRect().height() == plan.arena_bytes == arena
        # one path per colour: few items however many buffers
        assert len(item.paths) == len({t.kind for t in item.layout.tensors})
        water = dict(plan.high_water_by_step())
        assert list(plot.high_water_curve.yData) == [water[s] for s in sorted(water)]
    # both plans on the same y scale
    assert view.plots[0].getPlotItem().viewRange()[1] == view.plots[1].getPlotItem().viewRange()[1]


def test_model_level_plans_name_their_steps_tiles_and_aliases(lab_window):
    _window, lab = lab_window
    patch = lab.view.plots[1].layout_record
    assert not patch.stored_order and patch.steps == 152
    assert patch.step_label(9) == "patch 1: DEPTHWISE_CONV_2D#0"
    tile = next(t for t in patch.tensors if t.name.startswith("patch 1 CONV_2D#2"))
    assert tile.kind == "CONV_2D" and tile.producer == 2 and tile.tensor is None
    assert "patch 1: CONV_2D#2" in patch.describe(tile)
    assert "0.41× tflm-greedy" in lab.view.plots[1].getPlotItem().titleLabel.text
    choose(lab.view.compare, "aliased")
    aliased = lab.view.plots[1].layout_record
    alias = next(t for t in aliased.tensors if t.alias_of)
    assert "in place: shares the bytes of" in aliased.describe(alias)


def test_a_compared_planner_that_does_not_apply_is_explained(lab_window):
    _window, lab = lab_window
    choose(lab.view.model, str(MICRO))
    assert len(lab.state.layouts) == 1 and "no stage to run patch by patch" in lab.state.compare_note
    plot = lab.view.plots[1]
    assert plot.isVisible() and plot.layout_record is None
    assert "patch-based: does not apply" in plot.getPlotItem().titleLabel.text
    assert "no stage" in plot.message.toPlainText()
    assert drawn(lab.view.plots[0]).boundingRect().height() == 5968


def test_switching_planner_redraws_with_that_arena(qtbot, lab_window):
    _window, lab = lab_window
    view = lab.view
    model = load_model(PERSON)
    choose(view.planner, "linear")
    linear = plan_model(model, "linear")
    item = drawn(view.plots[0])
    assert item.boundingRect().height() == linear.arena_bytes == 241072
    assert [t.offset for t in item.layout.tensors] == list(linear.offsets)
    assert "4.36× the lower bound" in view.plots[0].getPlotItem().titleLabel.text
    # the y scale follows the larger arena, on both plots
    for plot in view.plots:
        assert plot.getPlotItem().viewRange()[1][1] >= linear.arena_bytes
    assert lab.state.fit.arena_bytes == linear.arena_bytes
    choose(view.compare, "none")
    assert len(lab.state.layouts) == 1 and not view.plots[1].isVisible()
    assert lab.settings()["planner"] == "linear"


def test_sram_limit_line_follows_the_board(lab_window):
    _window, lab = lab_window
    view = lab.view
    plot = view.plots[0]
    nrf = load_board("nrf52840")
    assert plot.limit_lines["sram"].value() == nrf.sram_bytes
    assert "SRAM" in plot.limit_lines["sram"].label.toPlainText()
    assert plot.limit_lines["arena limit"].value() == lab.state.fit.arena_limit_bytes
    choose(view.board, "samd21")
    samd = load_board("samd21")
    assert view.plots[0].limit_lines["sram"].value() == samd.sram_bytes
    assert lab.state.fit.sram_bytes == samd.sram_bytes
    assert view.budget.fit.sram_margin_bytes == samd.sram_bytes - 55296 - lab.state.fit.runtime_overhead_bytes
    assert not lab.state.fit.fits_sram and "does NOT fit" in view.budget_box.title()
    # the whole SRAM on the y axis when asked
    view.to_sram.setChecked(True)
    assert view.plots[0].getPlotItem().viewRange()[1][1] >= samd.sram_bytes


def test_per_op_table_rows_macs_and_cycles(lab_window):
    _window, lab = lab_window
    model = load_model(PERSON)
    table = lab.view.ops_table
    board = load_board("nrf52840")
    assert table.rowCount() == len(model.operators) == 31
    for i in range(len(model.operators)):
        macs = op_macs(model, i)
        assert lab.state.ops[i].macs == macs
        assert table.item(i, 3).text() == f"{macs:,}"
        assert table.item(i, 4).text() == f"{board.cycles_for(macs):,}"
        assert table.item(i, 1).text() == model.operators[i].op


def test_host_run_fills_measured_times(qtbot, lab_window):
    window, lab = lab_window
    first = lab.state.host_run
    assert first.where == "host" and len(first.op_us) == 31
    lab.run_host()
    wait_idle(qtbot, window)
    run = lab.state.host_run
    assert run is not first and run.repeats == MCU_HOST_REPEATS
    assert all(o.host_us is not None and o.host_us > 0 for o in lab.state.ops)
    assert all(lab.view.ops_table.item(i, 6).text() != "—" for i in range(31))
    assert "Host" in lab.view.runs.toPlainText()
    # the output is the interpreter's on the seeded input
    expected = mcu_host_run(load_model(PERSON), plan_model(load_model(PERSON)), 0, 1)[1][0]
    assert list(run.output) == expected.ravel().tolist()


def test_hover_names_the_tensor(lab_window):
    _window, lab = lab_window
    plot = lab.view.plots[0]
    tensor = next(t for t in plot.layout_record.tensors if t.name == "input")
    vb = plot.getPlotItem().getViewBox()
    scene = vb.mapViewToScene(QPointF(tensor.first + 0.5, tensor.offset + tensor.size / 2))
    plot._on_mouse(scene)
    assert plot.hovered_tensor is tensor
    text = lab.view.hover.text()
    assert "input" in text and "1×96×96×1" in text and "int8" in text
    assert f"{tensor.size:,} B" in text and f"offset {tensor.offset:,}" in text
    assert "graph input" in text and "live steps 0 … 1 (inputs … DEPTHWISE_CONV_2D#0)" in text
    conv = next(t for t in plot.layout_record.tensors if t.kind == "CONV_2D")
    assert "produced by op" in conv.describe() and "CONV_2D" in conv.describe()
    # empty space says which op runs at that step
    plot._on_mouse(vb.mapViewToScene(QPointF(31.5, 50000)))
    assert plot.hovered_tensor is None and "step 31: SOFTMAX#30" in lab.view.hover.text()


def test_virtual_board_runs_like_the_host_and_survives_its_loss(qtbot, lab_window):
    window, lab = lab_window
    choose(lab.view.model, str(MICRO))
    lab.connect_board(BoardChoice(VIRTUAL, "nrf52840"))
    wait_idle(qtbot, window)
    assert lab.session.connected
    assert "nRF52840" in window.board_label.text() and "socket://" in window.board_label.text()
    assert lab.view.run_board_button.isEnabled()

    lab.run_on_board()
    wait_idle(qtbot, window)
    run = lab.state.board_run
    assert run is not None and run.matches_host
    host = mcu_host_run(load_model(MICRO), plan_model(load_model(MICRO)), 0, 1)[0]
    assert run.output == host.output and run.arena_bytes == 5968
    assert all(lab.view.ops_table.item(i, 7).text() != "—" for i in range(4))
    assert "equals the host" in lab.view.runs.toPlainText()

    # a plan the wire protocol cannot carry (in-place aliases): the board plans itself
    choose(lab.view.planner, "aliased")
    lab.run_on_board()
    wait_idle(qtbot, window)
    assert lab.state.board_run.matches_host and "its own plan" in lab.state.board_run.where

    # the board vanishes: the run fails with a message, the app carries on
    lab.session.server.stop()
    lab.run_on_board()
    wait_idle(qtbot, window)
    assert not lab.session.connected
    assert "disconnected" in window.board_label.text()
    assert "failed" in window.statusBar().currentMessage()
    assert lab.view.status.text() and "connect the board again" in lab.view.status.text()
    assert not lab.view.run_board_button.isEnabled() and lab.view.connect_button.isEnabled()
    lab.run_host()  # still works
    wait_idle(qtbot, window)
    assert lab.state.host_run.output == host.output

    # reconnect: a fresh virtual board, and the model runs again
    lab.connect_board()
    wait_idle(qtbot, window)
    assert lab.session.connected and "disconnected" not in window.board_label.text()
    lab.run_on_board()
    wait_idle(qtbot, window)
    assert lab.state.board_run.matches_host


def test_board_killed_mid_upload(qtbot, lab_window):
    window, lab = lab_window  # person_detect: ~300 KB to upload
    lab.connect_board(BoardChoice(VIRTUAL, "nrf52840"))
    wait_idle(qtbot, window)
    lab.run_on_board()
    qtbot.waitUntil(lambda: lab.session.link is not None and lab.session.link.stats.frames_sent > 5,
                    timeout=30000)
    lab.session.server.stop()
    wait_idle(qtbot, window)
    assert lab.state.board_run is None
    assert "disconnected" in window.board_label.text()
    assert "went away" in lab.view.status.text() or "not connected" in lab.view.status.text()
    lab.connect_board()
    wait_idle(qtbot, window)
    assert lab.session.connected


def test_connect_dialog_lists_the_virtual_board_first(qtbot):
    dialog = ConnectDialog([("nrf52840", "nRF52840"), ("rp2040", "RP2040")], "rp2040")
    qtbot.addWidget(dialog)
    assert dialog.list.item(0).text().startswith("Virtual board")
    assert dialog.choice() == BoardChoice(VIRTUAL, "rp2040")
    dialog.url.setText("socket://127.0.0.1:5555")
    assert dialog.choice() == BoardChoice(PORT, "socket://127.0.0.1:5555")


def test_snapshot_shows_the_same_plans_read_only(qtbot, lab_window, make_window, tmp_path):
    window, lab = lab_window
    choose(lab.view.compare, "linear")
    path = window.export_snapshot(tmp_path / "mcu.json")
    raw = json.loads(path.read_text())
    section = raw["inferlab"]["labs"]["mcu"]
    assert section["metrics"]["arena_bytes"] == {"tflm-greedy": 55296, "linear": 241072}
    assert len(section["state"]["ops"]) == 31 and section["state"]["host_run"]["op_us"]
    spans = [e for e in raw["traceEvents"] if e.get("cat") == "mcu op"]
    assert [e["name"] for e in spans[:2]] == ["0 DEPTHWISE_CONV_2D", "1 DEPTHWISE_CONV_2D"]

    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    replay = other.lab("mcu")
    assert replay.read_only and not replay.view.run_host_button.isEnabled()
    assert not replay.view.planner.isEnabled() and not replay.view.connect_button.isEnabled()
    for live_plot, shown_plot in zip(lab.view.plots, replay.view.plots, strict=True):
        assert rects(drawn(shown_plot)) == rects(drawn(live_plot))
        assert shown_plot.limit_lines["sram"].value() == live_plot.limit_lines["sram"].value()
    assert replay.view.ops_table.rowCount() == 31
    assert replay.view.ops_table.item(5, 6).text() == lab.view.ops_table.item(5, 6).text()
    replay.run_host()  # refused while read-only
    assert not replay.busy()
    other.show_live()
    assert not replay.read_only and replay.view.run_host_button.isEnabled()


def test_broken_mcu_section_is_named(make_window, lab_window, tmp_path):
    window, _lab = lab_window
    path = window.export_snapshot(tmp_path / "mcu.json")
    data = json.loads(path.read_text())
    del data["inferlab"]["labs"]["mcu"]["state"]["layouts"][0]["tensors"][3]["offset"]
    path.write_text(json.dumps(data))
    other = make_window(str(tmp_path / "o.ini"))
    other.open_snapshot(path)  # the other labs open; the MCU lab's section is named as bad
    assert re.search(r"layouts\[0\]\.tensors\[3\]: missing field 'offset'",
                     other.snapshot_problems["mcu"])
    assert not other.lab("mcu").read_only


def test_opened_model_is_remembered_and_bad_files_refused(qtbot, make_window, settings_path, tmp_path):
    from inferlab.engines.mcu.graph import ModelError

    copy = tmp_path / "my_hello.tflite"
    shutil.copy(HELLO, copy)
    window = make_window()
    window.show_lab("mcu")
    lab = window.lab("mcu")
    lab.open_model(copy)
    assert lab.state.model == "my_hello" and lab.view.model.currentText() == "my_hello (opened)"
    assert len(lab.state.layouts[0].tensors) == len(plan_model(load_model(copy)).buffers)
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelError, match="not a TFLite model"):
        lab.open_model(bad)
    assert lab.state.model == "my_hello"
    wait_idle(qtbot, window)
    window.close()
    again = make_window(settings_path)
    assert again.lab("mcu").settings()["model"] == str(copy)


def test_model_the_interpreter_cannot_run_is_planned_not_run(qtbot, lab_window):
    window, lab = lab_window
    choose(lab.view.model, str(MODELS / "keyword_scrambled.tflite"))
    assert lab.state.note and "SVDF" in lab.state.note
    assert len(drawn(lab.view.plots[0]).layout.tensors) == 30
    lab.run_host()
    assert not window.context.running_tasks()
    assert "SVDF" in lab.view.status.text()


def test_host_outputs_equal_a_direct_interpreter_run():
    model = load_model(HELLO)
    plan = plan_model(model)
    run, outputs = mcu_host_run(model, plan, seed=3, repeats=2)
    from inferlab.engines.mcu.inputs import random_input
    from inferlab.engines.mcu.interpreter import ArenaInterpreter

    expected = ArenaInterpreter(model, plan).invoke(random_input(model, 3))
    assert np.array_equal(outputs[0], expected) and run.repeats == 2 and run.seed == 3
