"""Live CPU / RAM / GPU readings, sampled on a daemon thread into fixed-size rings.

`TelemetrySampler` reads psutil (per-core CPU %, RAM) and, for each GPU, NVML (utilisation,
memory, power, SM clock) `hz` times a second, keeps the last `capacity` samples and hands
out `history()`: a `TelemetryHistory` copy that views draw and snapshots store.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence

import numpy as np
import psutil
import torch

from inferlab.engines.hardware import nvml
from inferlab.engines.hardware.discovery import device_ids
from inferlab.engines.hardware.ring_buffer import RingBuffer
from inferlab.engines.hardware.telemetry_history import GPU_SERIES, GpuSeries, TelemetryHistory

__all__ = ["MAX_HZ", "MIN_HZ", "GpuSeries", "TelemetryHistory", "TelemetrySampler"]

MIN_HZ = 1.0
MAX_HZ = 10.0


class TelemetrySampler:
    """Samples the host (and its GPUs) at 1-10 Hz; thread-safe.

    `gpus`: device ids to watch ("cuda:0", ...); None watches every CUDA device torch sees,
    [] none. A GPU NVML cannot read keeps its column, filled with NaN.
    """

    def __init__(self, hz: float = 2.0, capacity: int = 600, gpus: Sequence[str] | None = None):
        self._lock = threading.Lock()
        self._hz = clamp_rate(hz)
        self._cores = psutil.cpu_count(logical=True) or 1
        self._ram_total_bytes = int(psutil.virtual_memory().total)
        self._gpu_ids = tuple(_default_gpu_ids() if gpus is None else gpus)
        self._gpu_handles = [_handle(gpu) for gpu in self._gpu_ids]
        self._t = RingBuffer(capacity)
        self._cpu = RingBuffer(capacity, (self._cores,))
        self._ram = RingBuffer(capacity)
        self._gpu = {name: RingBuffer(capacity, (len(self._gpu_ids),)) for name in GPU_SERIES}
        self._t0: float | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._wake = threading.Event()
        psutil.cpu_percent(percpu=True)  # the first call only starts psutil's interval

    @property
    def hz(self) -> float:
        return self._hz

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        return self._gpu_ids

    def set_rate(self, hz: float) -> float:
        """Sample `hz` times a second from now on, clamped to 1-10 Hz; returns the rate set."""
        self._hz = clamp_rate(hz)
        self._wake.set()  # a running thread re-plans its wait at once
        return self._hz

    def start(self) -> None:
        """Start sampling on a daemon thread (no-op when already running)."""
        with self._lock:
            if self.running:
                return
            if self._t0 is None:
                self._t0 = time.monotonic()
            self._stopping.clear()
            self._thread = threading.Thread(
                target=self._run, name="inferlab-telemetry", daemon=True
            )
            self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the thread and wait for it (it wakes at once; no sleep to wait out)."""
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self._thread = None

    def sample_once(self) -> None:
        """Take one reading now and append it (the thread calls this; so can tests)."""
        cpu = psutil.cpu_percent(percpu=True)
        ram_used = float(psutil.virtual_memory().used)
        readings = [nvml.read_gpu(handle) for handle in self._gpu_handles]
        now = time.monotonic()
        with self._lock:
            if self._t0 is None:
                self._t0 = now
            self._t.append(now - self._t0)
            self._cpu.append(_fit(cpu, self._cores))
            self._ram.append(ram_used)
            for column, name in enumerate(GPU_SERIES):
                self._gpu[name].append([reading[column] for reading in readings])

    def history(self) -> TelemetryHistory:
        """A copy of every held sample, oldest first."""
        with self._lock:
            series = {name: ring.values() for name, ring in self._gpu.items()}
            gpus = tuple(
                GpuSeries(gpu_id, **{name: series[name][:, j] for name in GPU_SERIES})
                for j, gpu_id in enumerate(self._gpu_ids)
            )
            return TelemetryHistory(
                t_s=self._t.values(),
                cpu_percent=self._cpu.values(),
                ram_used_bytes=self._ram.values(),
                ram_total_bytes=self._ram_total_bytes,
                gpus=gpus,
            )

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.sample_once()
            sampled_at = time.monotonic()
            while not self._stopping.is_set():
                remaining_s = sampled_at + 1.0 / self._hz - time.monotonic()
                if remaining_s <= 0:
                    break
                self._wake.wait(remaining_s)
                self._wake.clear()


def clamp_rate(hz: float) -> float:
    """`hz` limited to MIN_HZ..MAX_HZ; ValueError for NaN or a non-number."""
    value = float(hz)
    if math.isnan(value):
        raise ValueError("sampling rate must be a number, got NaN")
    return min(MAX_HZ, max(MIN_HZ, value))


def _fit(values: list[float], cores: int) -> np.ndarray:
    """Per-core readings padded with NaN (or cut) to the core count fixed at start."""
    row = np.full(cores, np.nan)
    count = min(cores, len(values))
    row[:count] = values[:count]
    return row


def _default_gpu_ids() -> list[str]:
    return [device for device in device_ids() if device.startswith("cuda:")]


def _handle(gpu_id: str):
    """The NVML handle for a "cuda:N" id, or None."""
    kind, _, index = str(gpu_id).partition(":")
    if kind != "cuda" or not index.isdigit():
        raise ValueError(f"telemetry watches GPUs by id like 'cuda:0', got {gpu_id!r}")
    if nvml.nvml() is None:
        return None
    return nvml.handle_for_cuda_index(int(index), _torch_uuid(int(index)))


def _torch_uuid(index: int) -> str | None:
    try:
        return str(torch.cuda.get_device_properties(index).uuid)
    except Exception:  # no torch CUDA (a CPU build on a GPU host): match by index
        return None
