"""NVIDIA's management library (NVML, through nvidia-ml-py), for whoever can use it.

NVML missing (no driver, no GPU, no package) is a normal state: every function here then
returns None (or NaN readings) and never raises. NVML is initialised once per process, on
first use, and left open.
"""

from __future__ import annotations

import math
import threading

import pynvml

_lock = threading.Lock()
_module = None
_tried = False


def nvml():
    """The initialised `pynvml` module, or None where NVML cannot be used."""
    global _module, _tried
    with _lock:
        if not _tried:
            _tried = True
            try:
                pynvml.nvmlInit()
                _module = pynvml
            except Exception:  # library missing, driver missing, or no permission
                _module = None
        return _module


def query(name: str, *args):
    """`pynvml.<name>(*args)`, or None when NVML is absent or the call fails."""
    lib = nvml()
    if lib is None:
        return None
    try:
        return getattr(lib, name)(*args)
    except Exception:  # NVMLError_NotSupported and friends: that value is unknown
        return None


def driver_version() -> str | None:
    """The NVIDIA driver version ("550.54.15"), or None."""
    return _text(query("nvmlSystemGetDriverVersion"))


def handle_for_cuda_index(index: int, uuid: str | None = None):
    """The NVML handle of torch's `cuda:<index>`, or None.

    torch numbers devices after CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, NVML in PCI
    order, so the device's UUID (from torch) is matched first; the index is the fallback.
    """
    if nvml() is None:
        return None
    if uuid:
        text = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        handle = query("nvmlDeviceGetHandleByUUID", text)
        if handle is not None:
            return handle
    return query("nvmlDeviceGetHandleByIndex", index)


def static_facts(handle) -> dict:
    """Name, clocks and power limit of one GPU; keys whose value NVML does not give are absent."""
    lib = nvml()
    if lib is None or handle is None:
        return {}
    facts = {
        "nvml_name": _text(query("nvmlDeviceGetName", handle)),
        "max_sm_clock_mhz": query("nvmlDeviceGetMaxClockInfo", handle, lib.NVML_CLOCK_SM),
        "memory_clock_mhz": query("nvmlDeviceGetMaxClockInfo", handle, lib.NVML_CLOCK_MEM),
    }
    limit_mw = query("nvmlDeviceGetEnforcedPowerLimit", handle)
    facts["power_limit_w"] = None if limit_mw is None else limit_mw / 1000.0
    return {key: value for key, value in facts.items() if value is not None}


def read_gpu(handle) -> tuple[float, float, float, float, float]:
    """One live reading: (util_percent, mem_used_bytes, mem_total_bytes, power_w, sm_clock_mhz).

    Any value NVML cannot give (or every value, with no handle) is NaN.
    """
    nan = math.nan
    lib = nvml()
    if lib is None or handle is None:
        return (nan, nan, nan, nan, nan)
    util = query("nvmlDeviceGetUtilizationRates", handle)
    memory = query("nvmlDeviceGetMemoryInfo", handle)
    power_mw = query("nvmlDeviceGetPowerUsage", handle)
    sm_clock = query("nvmlDeviceGetClockInfo", handle, lib.NVML_CLOCK_SM)
    return (
        nan if util is None else float(util.gpu),
        nan if memory is None else float(memory.used),
        nan if memory is None else float(memory.total),
        nan if power_mw is None else power_mw / 1000.0,
        nan if sm_clock is None else float(sm_clock),
    )


def _text(value) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value
