"""The main window without a screen: for `inferlab screenshot`, the report's images,
benchmarks and tests."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QTabWidget, QWidget

from inferlab.app.export import export_widget, widget_png
from inferlab.app.gui import create_application
from inferlab.app.labs.registry import LABS, lab_spec
from inferlab.app.main_window import MainWindow
from inferlab.app.offscreen import ensure_platform, process_events_for, temporary_settings


def make_window(size=(1280, 800), lazy: bool = False):
    """An offscreen window of `size`; `lazy`: each lab built when first shown or asked for."""
    ensure_platform()
    app = create_application()
    window = MainWindow(settings=temporary_settings(), lazy=lazy)
    window.resize(*size)
    window.show()
    return app, window


def render_lab(lab_id: str, out: str | Path, snapshot: str | Path | None = None,
               size=(1280, 800), timeout_s: float = 120.0, tab: str | None = None) -> Path:
    """Open the window on `lab_id` (live, or a snapshot read-only), let it settle, save a PNG;
    `tab`: the lab's tab of that name shown (its work settled too)."""
    spec = lab_spec(lab_id)  # unknown lab: ValueError listing the labs
    # lazy: the page shown is the only one built; a snapshot's labs are built as it opens
    _app, window = make_window(size, lazy=True)
    try:
        if snapshot is not None:
            window.open_snapshot(snapshot)
        _show_settled(window, spec, timeout_s)
        if tab is not None:
            select_tab(window.lab(lab_id).widget, tab)
            process_events_for(timeout_s, until=lambda: not window.context.running_tasks())
        process_events_for(0.5)
        return export_widget(window, out)
    finally:
        window.close()


def select_tab(widget: QWidget, name: str) -> None:
    """Show the tab called `name` (any case) of `widget`'s tab widgets (itself or inside it);
    ValueError listing the tabs where there is none of that name."""
    found = []
    for tabs in [widget] * isinstance(widget, QTabWidget) + widget.findChildren(QTabWidget):
        for i in range(tabs.count()):
            if tabs.tabText(i).replace("&", "").lower() == name.lower():
                tabs.setCurrentIndex(i)
                return
            found.append(tabs.tabText(i).replace("&", ""))
    raise ValueError(f"no tab {name!r} in this lab; its tabs: {', '.join(found) or 'none'}")


def render_snapshot_labs(snapshot: str | Path, lab_ids, size=(1280, 800),
                         timeout_s: float = 120.0) -> dict[str, bytes]:
    """PNG bytes of each lab's page as the window shows `snapshot` read-only, one window
    for all of them (the report's images). A lab the registry does not know is left out."""
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
