"""Run engine work off the GUI thread, with progress and cancellation.

A `Task` wraps a plain function `fn(progress, should_stop) -> result`. It runs in its own
QThread; `progress(fraction, message)` and the result come back to the GUI thread as
queued signals, so the window never freezes while an engine measures or steps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal

from inferlab.engines.hardware.cancel import check_stop


class Cancelled(Exception):
    """Raised inside a task when the user asked it to stop."""


class Task(QObject):
    """One piece of background work. Signals arrive on the thread that created the Task."""

    progress = Signal(float, str)
    finished = Signal(object)
    failed = Signal(str)
    cancelled = Signal()
    done = Signal()  # after any of the three above

    def __init__(self, name: str, fn: Callable, parent: QObject | None = None):
        super().__init__(parent)
        self.name = name
        self._fn = fn
        self._stop = threading.Event()
        self._thread = _TaskThread(self)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the work to stop at its next check; it reports `cancelled`."""
        self._stop.set()

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def wait(self, timeout_ms: int = 30000) -> bool:
        return self._thread.wait(timeout_ms)

    def is_running(self) -> bool:
        return self._thread.isRunning()

    def _run(self) -> None:
        try:
            result = self._fn(self._report, self.should_stop)
        except Exception as exc:  # noqa: BLE001 - every failure is shown, none kills the app
            if self._stop.is_set() or type(exc).__name__ == "Cancelled":
                self.cancelled.emit()
            else:
                # Users read the message; the class name only when there is no message.
                self.failed.emit(str(exc) or type(exc).__name__)
        else:
            if self._stop.is_set():
                self.cancelled.emit()
            else:
                self.finished.emit(result)
        self.done.emit()

    def _report(self, fraction: float, message: str = "") -> None:
        self.progress.emit(float(fraction), message)
        if self._stop.is_set():
            raise Cancelled(self.name)


class _TaskThread(QThread):
    def __init__(self, task: Task):
        super().__init__()
        self._task = task

    def run(self) -> None:
        self._task._run()


def file_reading(name: str, progress, should_stop, share: float = 1.0):
    """A reader's `progress(fraction of the file's bytes, message)` for a task reading the
    file `name`: the task's progress at share × fraction, each message named after the file,
    and the task stopped on request between calls."""
    progress(0.0, f"reading {name}")

    def reading(fraction: float, message: str) -> None:
        check_stop(should_stop)
        progress(share * fraction, f"{name}: {message}")

    return reading


def trace_status(path: str, figures: dict) -> str:
    """What a lab's status line says of the published trace its run read (`figures`: the
    reader's, `replay.trace_figures`): which file, its format, its requests (and those past
    the run's count not sent, where the figures say so) and its hit rate under an unbounded
    prefix cache; "" without one."""
    if not figures:
        return ""
    cut = figures.get("trace_requests_cut")
    sent = f" ({cut:,} past Requests not sent)" if cut else ""
    return (f" Trace {Path(path).name} ({figures['trace_format']}): "
            f"{figures['trace_requests']:,} requests{sent}, unbounded-cache hit rate "
            f"{figures['trace_hit_rate_unbounded']:.0%}.")
