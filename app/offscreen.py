"""Qt without a screen: the offscreen platform, throw-away settings, an event loop run for a
while. What renders, benchmarks and tests need before and around a window
(`offscreen_window` builds the window itself)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from inferlab.app.gui import display_available


def ensure_platform() -> None:
    """Use Qt's offscreen platform unless a display (or a platform) was chosen."""
    if "QT_QPA_PLATFORM" not in os.environ and not display_available():
        os.environ["QT_QPA_PLATFORM"] = "offscreen"


def temporary_settings():
    """A QSettings in a fresh temporary file: renders never touch the user's settings."""
    from PySide6.QtCore import QSettings

    folder = tempfile.mkdtemp(prefix="inferlab-settings-")
    return QSettings(str(Path(folder) / "inferlab.ini"), QSettings.IniFormat)


def process_events_for(seconds: float, until=None, poll_ms: int = 20) -> None:
    """Run a real event loop for `seconds`, or less once `until()` is true (polled)."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    end = time.monotonic() + seconds

    def check() -> None:
        if time.monotonic() >= end or (until is not None and until()):
            loop.quit()

    timer = QTimer()
    timer.setInterval(poll_ms)
    timer.timeout.connect(check)
    timer.start()
    check()
    if time.monotonic() < end and not (until is not None and until()):
        loop.exec()
    timer.stop()
