"""Timing one device operation: warm up, then the median over repeated samples.

CPU samples are timed with perf_counter; CUDA samples with CUDA events after a synchronize,
so queued work is never counted and the host's launch cost is not mistaken for the GPU's.
An operation shorter than MIN_SAMPLE_S is run several times per sample (the count is set
from the last warm-up call), so that short kernels are not lost in timer resolution.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import torch

# Shortest sample worth timing, per device kind (seconds).
MIN_SAMPLE_S = {"cpu": 0.002, "cuda": 0.010}
MAX_CALLS_PER_SAMPLE = 1000


def synchronize(device) -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_call_s(fn: Callable[[], object], device, repeats: int = 5, warmup: int = 2) -> float:
    """Median seconds one call of `fn` takes on `device` (a torch.device).

    `warmup` untimed calls come first (at least one, which also sizes the samples).
    """
    if int(repeats) < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if int(warmup) < 0:
        raise ValueError(f"warmup must be 0 or more, got {warmup}")
    estimate_s = 0.0
    for _ in range(max(1, int(warmup))):  # at least one untimed call sets the calls per sample
        estimate_s = _sample_s(fn, device, 1)
    floor_s = MIN_SAMPLE_S.get(device.type, MIN_SAMPLE_S["cpu"])
    calls = 1 if estimate_s >= floor_s else math.ceil(floor_s / max(estimate_s, 1e-9))
    calls = min(calls, MAX_CALLS_PER_SAMPLE)
    samples = [_sample_s(fn, device, calls) / calls for _ in range(int(repeats))]
    return statistics.median(samples)


def _sample_s(fn: Callable[[], object], device, calls: int) -> float:
    synchronize(device)
    if device.type == "cuda":
        with torch.cuda.device(device):  # events record on that device's current stream
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
    start_s = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize(device)
    return time.perf_counter() - start_s
