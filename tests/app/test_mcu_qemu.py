"""The MCU lab's emulated board: Connect board… offers the firmware for the lab's model and
plan on QEMU's Cortex-M4; it is then driven like a real board, its per-op cycles fill the
table, and QEMU never outlives a disconnect, another board, or the window.

Needs qemu-system-arm and arm-none-eabi-gcc; without them these tests fail with the exact
install command (as the firmware tests do), except the one that checks that message."""

from __future__ import annotations

import json
import shutil

import psutil
import pytest
from PySide6.QtCore import QSettings, Qt

from inferlab.engines.board.session import EMULATED, VIRTUAL, BoardChoice
from inferlab.engines.board.toolchain import install_command
from inferlab.engines.labs.mcu.session import mcu_host_run
from inferlab.engines.mcu.examples import examples_dir
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.views.mcu_connect_dialog import ConnectDialog
from tests.firmware.fwtools import need_tools

MODELS = examples_dir()
HELLO = MODELS / "hello_world_int8.tflite"
MICRO = MODELS / "micro_speech_quantized.tflite"
BOARDS = [("nrf52840", "nRF52840"), ("rp2040", "RP2040")]


def qemu_children() -> list[int]:
    """QEMU processes this test process started and has not reaped (zombies count)."""
    return [p.pid for p in psutil.Process().children(recursive=True)
            if p.name().startswith("qemu-system")]


def wait_idle(qtbot, window, timeout_ms=60000):
    lab = window.lab("mcu")
    qtbot.waitUntil(lambda: not window.context.running_tasks() and not lab.busy(), timeout=timeout_ms)


@pytest.fixture
def hello_lab(qtbot, make_window, settings_path, tmp_path):
    """The MCU lab on hello_world_int8 (3 ops), firmware built under tmp_path."""
    need_tools("qemu-mps2-an386")
    saved = QSettings(settings_path, QSettings.IniFormat)
    saved.setValue("labs/mcu", json.dumps({"model": str(HELLO), "compare": "none"}))
    saved.sync()
    window = make_window()
    window.show_lab("mcu")
    lab = window.lab("mcu")
    lab.session.images_dir = tmp_path / "images"
    qtbot.waitUntil(lambda: lab.state is not None and lab.state.host_run is not None, timeout=30000)
    wait_idle(qtbot, window)
    yield window, lab
    lab.shutdown()
    assert qemu_children() == []


def test_dialog_offers_the_emulated_board_for_the_model_and_a_buffer_plan(qtbot):
    need_tools("qemu-mps2-an386")
    dialog = ConnectDialog(BOARDS, "rp2040", model=str(HELLO), planner="best")
    qtbot.addWidget(dialog)
    item = dialog.list.item(1)
    assert item.text().startswith("Emulated Cortex-M4 (QEMU): firmware for hello_world_int8, best")
    assert item.flags() & Qt.ItemIsEnabled and "-icount" in item.toolTip()
    dialog.list.setCurrentRow(1)
    assert dialog.choice() == BoardChoice(EMULATED, "rp2040", str(HELLO), "best")
    # a plan the firmware cannot hold: said so, and built with tflm-greedy
    patched = ConnectDialog(BOARDS, "nrf52840", model=str(HELLO), planner="patch-based")
    qtbot.addWidget(patched)
    patched.list.setCurrentRow(1)
    assert patched.choice() == BoardChoice(EMULATED, "nrf52840", str(HELLO), "tflm-greedy")
    assert "the patch-based plan" in patched.note.text() and "tflm-greedy" in patched.note.text()


def test_without_qemu_the_entry_is_disabled_with_the_install_command(qtbot, monkeypatch):
    which = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda name, *a, **k: None if name == "qemu-system-arm" else which(name, *a, **k))
    dialog = ConnectDialog(BOARDS, "nrf52840", model=str(HELLO))
    qtbot.addWidget(dialog)
    item = dialog.list.item(1)
    assert item.text() == "Emulated Cortex-M4 (QEMU) — not installed"
    assert not item.flags() & Qt.ItemIsEnabled
    assert install_command() in item.toolTip() and install_command() in dialog.note.text()
    dialog.list.setCurrentItem(item)
    assert dialog.choice() is None or dialog.choice().kind != EMULATED


def test_emulated_board_runs_the_firmware_and_never_outlives_the_lab(qtbot, hello_lab):
    window, lab = hello_lab
    dialog = ConnectDialog(BOARDS, "nrf52840", model=lab.settings()["model"],
                           planner=lab.settings()["planner"])
    qtbot.addWidget(dialog)
    dialog.list.setCurrentRow(1)
    lab.connect_board(dialog.choice())
    wait_idle(qtbot, window)
    session = lab.session
    assert session.connected and session.emulator.running, lab.view.status.text()
    url = session.url
    assert url.startswith("socket://127.0.0.1:")
    assert window.board_label.text().strip() == f"Board: qemu nrf52840 ({url})"
    assert qemu_children() == [session.emulator.process.pid]
    assert "Firmware for hello_world_int8" in lab.view.status.text()

    lab.run_on_board()
    wait_idle(qtbot, window)
    run = lab.state.board_run
    host = mcu_host_run(load_model(HELLO), plan_model(load_model(HELLO)), 0, 1)[0]
    assert run is not None and run.matches_host and run.output == host.output
    assert run.where == f"qemu nrf52840 on {url}" and run.cycles_measured
    assert len(run.op_cycles) == 3 and all(c > 0 for c in run.op_cycles)
    for i, cycles in enumerate(run.op_cycles):
        assert run.op_us[i] == pytest.approx(cycles / 25, rel=1e-6)  # SysTick at 25 MHz
        cell = lab.view.ops_table.item(i, 7)
        assert cell.text() == f"{run.op_us[i]:,.1f}"
        assert cell.toolTip().startswith(f"{cycles:,} cycles measured (SysTick) on qemu nrf52840")
    assert f"{run.cycles:,} cycles (measured)" in lab.view.runs.toPlainText()

    # another model: the firmware is rebuilt for it and QEMU restarted, as a board reflashed
    old_pid = session.emulator.process.pid
    lab.view.model.setCurrentIndex(lab.view.model.findData(str(MICRO)))
    lab.run_on_board()
    wait_idle(qtbot, window)
    assert lab.state.board_run.matches_host, lab.view.status.text()
    assert "Rebuilt the firmware for micro_speech_quantized" in lab.view.status.text()
    assert qemu_children() == [session.emulator.process.pid] != [old_pid]
    assert session.url in window.board_label.text() and session.url != url

    # another board: QEMU stops
    lab.connect_board(BoardChoice(VIRTUAL, "nrf52840"))
    wait_idle(qtbot, window)
    assert session.connected and qemu_children() == []

    # the emulated board again, then disconnected: QEMU stops
    lab.connect_board(lab.emulated_choice())
    wait_idle(qtbot, window)
    assert session.emulated and len(qemu_children()) == 1
    lab.disconnect_board()
    assert qemu_children() == [] and "QEMU stopped" in lab.view.status.text()

    # and once more, then the window closes: QEMU stops
    lab.connect_board()
    wait_idle(qtbot, window)
    assert session.connected and len(qemu_children()) == 1
    window.close()
    assert qemu_children() == []


def test_closing_the_window_while_qemu_starts_leaves_none_behind(qtbot, hello_lab):
    window, lab = hello_lab
    lab.connect_board(lab.emulated_choice())
    qtbot.waitUntil(lambda: lab.session._starting is not None
                    and lab.session._starting.process is not None, timeout=30000)
    window.close()
    assert not window.context.running_tasks()
    assert qemu_children() == [] and not lab.session.connected


def test_a_plan_too_large_for_the_preset_says_so_and_starts_no_qemu(qtbot, hello_lab):
    window, lab = hello_lab
    lab.view.model.setCurrentIndex(lab.view.model.findData(str(MODELS / "person_detect.tflite")))
    lab.connect_board(lab.emulated_choice("samd21"))
    wait_idle(qtbot, window)
    assert not lab.session.connected and qemu_children() == []
    assert "does not fit samd21" in lab.view.status.text() and "55,296 B" in lab.view.status.text()
    assert "qemu samd21: disconnected" in window.board_label.text()
