"""What every lab shares: the chosen device, measured roofs, background tasks, the trace."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QObject, QSettings, Signal

from inferlab.app.worker import Task
from inferlab.engines.trace.recorder import TraceRecorder

DISCOVERY_WAIT_MS = 300_000  # importing torch on a busy machine: seconds, never minutes


class AppContext(QObject):
    """Shared, observable application state. Labs read it and listen to its signals."""

    device_changed = Signal(str)
    devices_changed = Signal()  # the device list arrived (see `discover_in_background`)
    roofs_changed = Signal(str)  # device id whose measured roofs changed
    task_started = Signal(str)
    task_progress = Signal(str, float, str)  # task name, fraction, message
    task_ended = Signal(str, str)  # task name, outcome: "ok" | "failed: ..." | "cancelled"
    board_changed = Signal(str)

    def __init__(self, settings: QSettings | None = None, devices=None, quick: bool = False,
                 parent=None, discover: bool = True):
        """`quick`: measure with small sizes (tests, screenshots of snapshots).

        `devices`: the device list (default: discovered now, which imports torch). With
        `discover=False` the list stays empty until `set_devices` or `discover_in_background`
        fills it: the window can paint before torch is imported.
        """
        super().__init__(parent)
        self.quick = quick
        self.settings = settings if settings is not None else QSettings()
        self.recorder = TraceRecorder()
        self._roofs: dict[str, object] = {}
        self._tasks: list[Task] = []
        self._discovery: Task | None = None
        self.discovery_error: str | None = None
        self.board = "no board"
        self.devices: list = []
        self.device_id = str(self.settings.value("device", "cpu"))  # until the list is known
        if devices is not None:
            self.set_devices(devices)
        elif discover:
            self.set_devices(discover_devices())

    # devices ---------------------------------------------------------------------------
    def device_ids(self) -> list[str]:
        return [d.id for d in self.devices]

    def set_devices(self, devices) -> None:
        """The device list is known: keep the saved device if present, else the first."""
        self.devices = list(devices)
        saved = str(self.settings.value("device", "cpu"))
        self.device_id = saved if saved in self.device_ids() else self.devices[0].id
        self.devices_changed.emit()

    def discover_in_background(self) -> None:
        """Discover the devices on a worker thread (torch is imported there, not on the GUI
        thread); `devices_changed` says when they are known. Not a task: no progress bar, and
        labs waiting for idle are not held up."""
        if self.devices or self._discovery is not None:
            return

        def work(_progress, _should_stop):
            return discover_devices()

        self._discovery = Task("Detecting devices", work, parent=self)
        self._discovery.finished.connect(self._discovered)
        self._discovery.failed.connect(self._discovery_failed)
        self._discovery.start()

    def wait_for_devices(self) -> None:
        """Return once the device list is known: wait for a discovery running in the
        background, or discover now. Raises what discovery raised."""
        if self._discovery is not None:
            self._discovery.wait(DISCOVERY_WAIT_MS)
            QCoreApplication.sendPostedEvents(self._discovery)
            QCoreApplication.sendPostedEvents(self)
        if not self.devices:
            self.set_devices(discover_devices())

    def _discovered(self, devices) -> None:
        if not self.devices:
            self.set_devices(devices)

    def _discovery_failed(self, message: str) -> None:
        self.discovery_error = message
        self.devices_changed.emit()  # still empty: listeners show the error

    def device(self, device_id: str | None = None):
        wanted = device_id or self.device_id
        for info in self.devices:
            if info.id == wanted:
                return info
        raise ValueError(f"unknown device {wanted!r}; available: {', '.join(self.device_ids())}")

    def set_device(self, device_id: str) -> None:
        self.device(device_id)  # validates
        if device_id != self.device_id:
            self.device_id = device_id
            self.settings.setValue("device", device_id)
            self.device_changed.emit(device_id)

    # measured roofs ---------------------------------------------------------------------
    def roofs(self, device_id: str | None = None):
        """The MeasuredRoofs of a device, or None before the first measurement."""
        return self._roofs.get(device_id or self.device_id)

    def set_roofs(self, roofs) -> None:
        self._roofs[roofs.device] = roofs
        self.recorder.counter(
            f"roofs {roofs.device}",
            {f"peak_{k}_gflops": v / 1e9 for k, v in roofs.peak_flops.items()}
            | {"bandwidth_gb_per_s": roofs.bw_bytes_per_s / 1e9},
        )
        self.roofs_changed.emit(roofs.device)

    def all_roofs(self) -> dict:
        return dict(self._roofs)

    # background work ---------------------------------------------------------------------
    def run_task(
        self,
        name: str,
        fn: Callable,
        on_result: Callable | None = None,
        on_error: Callable | None = None,
        on_done: Callable | None = None,
    ) -> Task:
        """Run `fn(progress, should_stop)` in a worker thread; results come back here.
        `on_done()` after the result, error or cancel (all connected before the thread
        starts: a signal emitted before its slot is connected is lost)."""
        collect_garbage_in_gui_thread()
        task = Task(name, fn, parent=self)
        start_s = time.perf_counter()
        self._tasks.append(task)

        outcome = ["ok"]

        def finish(result: str) -> None:
            outcome[0] = result
            self.recorder.add_span(name, start_s, time.perf_counter(), cat="task",
                                   args={"outcome": result})

        def forget() -> None:
            # Last: after the result slots ran; `task_ended` listeners see it gone.
            self._forget(task)
            self.task_ended.emit(name, outcome[0])

        task.progress.connect(lambda f, m: self.task_progress.emit(name, f, m))
        if on_result is not None:
            task.finished.connect(on_result)
        if on_error is not None:
            task.failed.connect(on_error)
        task.finished.connect(lambda _r: finish("ok"))
        task.failed.connect(lambda msg: finish(f"failed: {msg}"))
        task.cancelled.connect(lambda: finish("cancelled"))
        task.done.connect(forget)
        if on_done is not None:
            task.done.connect(on_done)
        self.task_started.emit(name)
        task.start()
        return task

    def running_tasks(self) -> list[Task]:
        """Tasks whose thread runs or whose result has not yet reached this (GUI) thread:
        a task counts until its `done` signal has been handled, after its result slots."""
        return list(self._tasks)

    def cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.stop()

    def wait_for_tasks(self, timeout_ms: int = 60000) -> None:
        """Wait for every task's thread, then deliver its queued result and `done` here. A
        device discovery still running is waited for too (it cannot be stopped), so that no
        thread outlives the window."""
        if self._discovery is not None:
            self._discovery.wait(DISCOVERY_WAIT_MS)
        for task in list(self._tasks):
            task.wait(timeout_ms)
            QCoreApplication.sendPostedEvents(task)

    def _forget(self, task: Task) -> None:
        if task in self._tasks:
            self._tasks.remove(task)
        task.wait(1000)  # the thread has emitted `done`; let it return before Qt frees it
        task.deleteLater()


_GC = None


def collect_garbage_in_gui_thread() -> None:
    """From the first worker on, Python's cyclic garbage collector runs on a GUI-thread timer
    (pyqtgraph's GarbageCollector), not in whichever thread allocates: a worker that collects
    a dead view's Qt objects deletes widgets off the GUI thread, which can hang or crash Qt
    (seen here: a worker building a KV pool stalled while it collected a closed window)."""
    global _GC
    if _GC is None:
        from pyqtgraph.util.garbage_collector import GarbageCollector

        _GC = GarbageCollector(interval=0.5)


def discover_devices() -> list:
    """The devices torch, NVML and psutil see. torch is imported here, on first use: the
    window paints before it (device discovery runs on a worker thread after the first paint)."""
    from inferlab.engines.hardware.discovery import discover_devices as discover

    return discover()
