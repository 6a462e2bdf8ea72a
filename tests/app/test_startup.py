"""Start-up: `inferlab` paints its window before importing torch, then builds the labs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from PySide6.QtCore import QSettings

from inferlab.app.context import AppContext
from inferlab.app.labs import LAB_IDS


def launch_offscreen(tmp_path, exit_after_paint: str) -> dict[str, str]:
    """Run the real launch path (`python -m inferlab.app.cli`, no arguments); its report."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path),
               INFERLAB_EXIT_AFTER_PAINT=exit_after_paint)
    out = subprocess.run([sys.executable, "-m", "inferlab.app.cli"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


@pytest.mark.slow  # a subprocess start-up
def test_first_paint_comes_before_torch_is_imported(tmp_path):
    report = launch_offscreen(tmp_path, "1")
    assert float(report["first_paint_s"]) > 0
    assert report["torch_imported_at_first_paint"] == "False"


@pytest.mark.slow  # a subprocess start-up
def test_launch_builds_the_current_lab_first_then_every_lab(tmp_path):
    report = launch_offscreen(tmp_path, "labs")
    assert report["torch_imported_at_first_paint"] == "False"
    assert report["current_lab"] == "hardware"  # no saved lab: the first one
    assert report["labs"].split(",") == list(LAB_IDS)


@pytest.fixture
def deferred_window(qtbot, settings_path):
    """A MainWindow on the launch path's deferred start-up (no devices discovered yet)."""
    from inferlab.app.main_window import MainWindow

    windows = []

    def make(saved_lab: str | None = None):
        settings = QSettings(settings_path, QSettings.IniFormat)
        if saved_lab is not None:
            settings.setValue("window/lab", saved_lab)
        window = MainWindow(context=AppContext(settings=settings, quick=True, discover=False),
                            deferred=True)
        qtbot.addWidget(window)
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()


def test_the_shell_comes_from_the_registry_and_labs_follow_the_first_paint(qtbot, deferred_window):
    window = deferred_window("memory")
    assert window._labs == {}  # nothing built before the window is shown
    assert [window.sidebar.item(i).text() for i in range(window.sidebar.count())] == [
        spec.title for spec in window.specs]
    assert window.stack.currentWidget().objectName() == "lab_placeholder"
    assert not window.device_combo.isEnabled()
    assert "detecting" in window.device_combo.currentText()

    built = []
    window.lab_built.connect(built.append)
    with qtbot.waitSignal(window.startup_finished, timeout=120000):
        window.show()
    assert built[0] == "memory"  # the saved lab first, the others in sidebar order
    assert sorted(built) == sorted(LAB_IDS)
    assert [lab.lab_id for lab in window.labs] == list(LAB_IDS)
    assert window.current_lab().lab_id == "memory"
    assert window.stack.currentWidget() is window.lab("memory").widget
    ids = [window.device_combo.itemData(i) for i in range(window.device_combo.count())]
    assert ids[0] == "cpu" and window.device_combo.isEnabled()
    pages = [window.stack.widget(i) for i in range(window.stack.count())]
    assert pages == [lab.widget for lab in window.labs]  # every placeholder replaced


def test_a_lab_asked_for_during_start_up_is_built_at_once(qtbot, deferred_window, tmp_path):
    window = deferred_window()
    memory = window.lab("memory")  # before the first paint: waits for the devices, builds it
    assert window.context.device_ids()[0] == "cpu"
    assert window.stack.widget(window.specs.index(window._spec("memory"))) is memory.widget
    with pytest.raises(ValueError, match="unknown lab 'nope'"):
        window.lab("nope")
    path = window.export_snapshot(tmp_path / "snap.json")  # builds the rest
    assert window.started_up and path.exists()


def test_a_failed_device_discovery_is_shown(qtbot, deferred_window, monkeypatch):
    from inferlab.engines.hardware import discovery

    def broken():
        raise RuntimeError("no /proc/cpuinfo")

    monkeypatch.setattr(discovery, "discover_devices", broken)
    window = deferred_window()
    window.show()
    qtbot.waitUntil(lambda: window.context.discovery_error is not None, timeout=60000)
    qtbot.waitUntil(lambda: "hardware" in window._labs, timeout=60000)
    assert window.device_combo.currentText() == "no devices: no /proc/cpuinfo"
    assert "discovery failed: no /proc/cpuinfo" in window.lab("hardware").view.facts.item(0, 1).text()
    memory = window._spec("memory")
    page = window.stack.widget(window.specs.index(memory))
    assert page.text() == f"Cannot open {memory.title}: device discovery failed: no /proc/cpuinfo"
    assert not window.context.running_tasks()


def test_a_device_list_arriving_after_close_starts_nothing(qtbot, deferred_window):
    from inferlab.engines.hardware.discovery import discover_devices

    window = deferred_window()
    window.lab("hardware")  # built, as at start-up, before the devices are known
    assert not window.context.devices
    window.close()
    window.context.set_devices(discover_devices())  # as a discovery ending during close
    assert not window.context.running_tasks()  # no roof measurement began
    assert "detecting" in window.device_combo.currentText()


def test_the_hardware_lab_draws_before_the_device_list(qtbot, settings_path):
    from inferlab.app.labs.hardware import HardwareLab
    from inferlab.engines.hardware.discovery import discover_devices

    context = AppContext(settings=QSettings(settings_path, QSettings.IniFormat), quick=True,
                         discover=False)
    lab = HardwareLab(context)
    qtbot.addWidget(lab.widget)
    try:
        assert lab.view.facts.item(0, 1).text() == "detecting devices…"
        assert not lab.view.measure_button.isEnabled()
        lab.activated()  # nothing to measure on yet
        assert not context.running_tasks()
        lab.sampler.sample_once()
        assert lab.sampler.history().cpu_percent.shape[0] >= 1  # telemetry already runs

        context.set_devices(discover_devices())
        assert lab.view.facts.item(0, 1).text() == "cpu"
        assert lab.view.measure_button.isEnabled()
    finally:
        lab.shutdown()
        context.cancel_tasks()
        context.wait_for_tasks(10000)
