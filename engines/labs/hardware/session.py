"""What the hardware lab computes from engines/hardware: the device list, the telemetry
sampler and a short telemetry recording, and one device's measured roofs. The lab and
`inferlab run hardware` both measure here."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from inferlab.engines.hardware.discovery import DeviceInfo, discover_devices, torch_device
from inferlab.engines.hardware.microbench import MeasuredRoofs, measure_roofs
from inferlab.engines.hardware.telemetry import TelemetryHistory, TelemetrySampler

HISTORY_SAMPLES = 600  # the window's strip charts: five minutes at 2 Hz


def hardware_devices() -> list[DeviceInfo]:
    """The compute devices: the CPU first, then every CUDA device torch sees."""
    return discover_devices()


def start_sampler(hz: float, gpus: Sequence[str] | None = None,
                  capacity: int = HISTORY_SAMPLES) -> TelemetrySampler:
    """A running sampler of the host and `gpus` (None: every CUDA device torch sees)."""
    sampler = TelemetrySampler(hz=hz, capacity=capacity, gpus=gpus)
    sampler.start()
    return sampler


def record_telemetry(samples: int, hz: float) -> TelemetryHistory:
    """`samples` readings, `1 / hz` seconds apart, taken here (no thread)."""
    sampler = TelemetrySampler(hz=hz, capacity=max(1, samples))
    for i in range(samples):
        if i:
            time.sleep(1.0 / sampler.hz)
        sampler.sample_once()
    return sampler.history()


def hardware_roofs(device: str, quick: bool = False, progress: Callable | None = None,
                   should_stop: Callable[[], bool] | None = None) -> MeasuredRoofs:
    """`device`'s measured roofs (ValueError naming the devices there are, for one that is
    not): peak matmul FLOP/s per compute dtype, then copy bandwidth."""
    torch_device(device)
    return measure_roofs(device, quick=quick, progress=progress, should_stop=should_stop)
