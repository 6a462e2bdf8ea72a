"""What the lab tests share: waiting for a window's work, opening a lab with settings."""

from __future__ import annotations


def wait_idle(qtbot, window, timeout_ms=60000):
    """Until no task of the window runs or has a result still to deliver."""
    qtbot.waitUntil(lambda: not window.context.running_tasks(), timeout=timeout_ms)


def open_lab(qtbot, make_window, lab_id: str, timeout_ms: int = 60000, **settings):
    """(window, lab): a new window showing `lab_id` with `settings` over its own, once its
    session is open and its first work is done."""
    window = make_window()
    lab = window.lab(lab_id)
    lab._settings = lab._settings | settings
    window.show_lab(lab_id)
    qtbot.waitUntil(lambda: lab.session is not None, timeout=timeout_ms)
    wait_idle(qtbot, window, timeout_ms)
    return window, lab
