"""Render the window without a screen: for `inferlab screenshot`, benchmarks and tests."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path


def ensure_platform() -> None:
    """Use Qt's offscreen platform unless a display (or a platform) was chosen."""
    from inferlab.app.gui import display_available

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


def make_window(size=(1280, 800)):
    ensure_platform()
    from inferlab.app.gui import create_application
    from inferlab.app.main_window import MainWindow

    app = create_application()
    window = MainWindow(settings=temporary_settings())
    window.resize(*size)
    window.show()
    return app, window


def render_lab(lab_id: str, out: str | Path, snapshot: str | Path | None = None,
               size=(1280, 800), timeout_s: float = 120.0) -> Path:
    """Open the window on `lab_id` (live, or a snapshot read-only), let it settle, save a PNG."""
    from inferlab.app.export import export_widget
    from inferlab.app.labs.registry import lab_spec

    spec = lab_spec(lab_id)  # unknown lab: ValueError listing the labs
    _app, window = make_window(size)
    try:
        if snapshot is not None:
            window.open_snapshot(snapshot)
        _show_settled(window, spec, timeout_s)
        process_events_for(0.5)
        return export_widget(window, out)
    finally:
        window.close()


def render_snapshot_labs(snapshot: str | Path, lab_ids, size=(1280, 800),
                         timeout_s: float = 120.0) -> dict[str, bytes]:
    """PNG bytes of each lab's page as the window shows `snapshot` read-only, one window
    for all of them (the report's images). A lab the registry does not know is left out."""
    from inferlab.app.export import widget_png
    from inferlab.app.labs.registry import LABS

    known = {spec.id: spec for spec in LABS}
    out: dict[str, bytes] = {}
    _app, window = make_window(size)
    try:
        window.open_snapshot(snapshot)
        for lab_id in lab_ids:
            if lab_id in known:
                _show_settled(window, known[lab_id], timeout_s)
                out[lab_id] = widget_png(window)
    finally:
        window.close()
    return out


def _show_settled(window, spec, timeout_s: float) -> None:
    """Show `spec`'s lab and let it settle: live labs start their default work on activation;
    wait for it, and for the lab's settle time so telemetry has several samples."""
    window.show_lab(spec.id)
    process_events_for(spec.screenshot_settle_s)
    process_events_for(timeout_s, until=lambda: not window.context.running_tasks())
