"""Which compute devices this machine has (`cpu`, then `cuda:0`, `cuda:1`, ...) and what they are.

torch and psutil say what exists; NVML (when present) adds driver, clocks and power limit.
A missing GPU or NVML is a normal state: the list then holds the CPU alone.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass, field

import psutil
import torch

from inferlab.engines.dtypes import torch_dtype
from inferlab.engines.hardware import cpu_info, nvml
from inferlab.engines.hardware.versions import runtime_versions

__all__ = [
    "DeviceInfo",
    "device_ids",
    "discover_devices",
    "get_device",
    "runtime_versions",
    "torch_device",
]

# Reduced-precision formats a device may compute matmuls in, in display order.
REDUCED_DTYPES: tuple[str, ...] = ("bf16", "fp16")


@dataclass(frozen=True)
class DeviceInfo:
    """One compute device as discovered.

    For a GPU, `cores` counts streaming multiprocessors and `threads` the threads they can
    hold resident. `compute_dtypes` lists the formats with a real (not emulated) matmul kernel.
    """

    id: str
    kind: str
    name: str
    cores: int
    threads: int
    memory_bytes: int
    freq_mhz: float | None
    compute_dtypes: tuple[str, ...]
    details: dict = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict:
        """JSON-safe dict (the CLI's `devices --json` lists these)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "cores": self.cores,
            "threads": self.threads,
            "memory_bytes": self.memory_bytes,
            "freq_mhz": self.freq_mhz,
            "compute_dtypes": list(self.compute_dtypes),
            "details": dict(self.details),
        }


def discover_devices() -> list[DeviceInfo]:
    """The CPU first, then every CUDA device torch sees, in torch's order."""
    devices = [_cpu_device()]
    for index in range(_cuda_device_count()):
        devices.append(_cuda_device(index))
    return devices


def device_ids() -> list[str]:
    """Ids of the devices present: ["cpu", "cuda:0", ...]."""
    return ["cpu"] + [f"cuda:{index}" for index in range(_cuda_device_count())]


def get_device(device_id: str) -> DeviceInfo:
    """The DeviceInfo for `device_id` ("cuda" means "cuda:0"); ValueError if there is none."""
    wanted = _checked_id(device_id)
    if wanted == "cpu":
        return _cpu_device()
    return _cuda_device(int(wanted.split(":")[1]))


def torch_device(device_id: str):
    """The torch.device for a present device id; ValueError naming the ones available."""
    return torch.device(_checked_id(device_id))


def _checked_id(device_id: str) -> str:
    ids = device_ids()
    text = str(device_id).strip().lower()
    if text == "cuda":
        text = "cuda:0"
    if text not in ids:
        raise ValueError(f"unknown device {device_id!r}; available: {', '.join(ids)}")
    return text


def _cuda_device_count() -> int:
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken driver looks like no GPU, never a crash
        return 0


def _cpu_device() -> DeviceInfo:
    info = cpu_info.read_cpuinfo()
    threads = psutil.cpu_count(logical=True) or 1
    fast, slow = cpu_dtype_support()
    details = {
        "arch": platform.machine(),
        "flags": list(cpu_info.cpu_flags(info)),
        "torch_threads": _torch_threads(),
        "torch_cpu_capability": _torch_cpu_capability(),
        # Formats torch runs on this CPU only through a slow reference path: listed so the
        # user sees why they are missing from compute_dtypes.
        "slow_dtypes": list(slow),
    }
    return DeviceInfo(
        id="cpu",
        kind="cpu",
        name=cpu_info.cpu_name(info),
        cores=psutil.cpu_count(logical=False) or threads,
        threads=threads,
        memory_bytes=int(psutil.virtual_memory().total),
        freq_mhz=cpu_info.cpu_freq_mhz(info),
        compute_dtypes=("fp32", *fast),
        details=details,
    )


@functools.lru_cache(maxsize=1)
def cpu_dtype_support() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(fast, slow): reduced formats torch's CPU matmul runs with a real kernel, and without.

    A format is fast when a small matmul in it runs and oneDNN reports native support for
    it on this CPU. Without one, torch falls back to a scalar loop (fp16 on CPUs without
    AVX512-FP16/AMX-FP16 runs at about 1 GFLOP/s), which is not a roof worth plotting.
    """
    fast: list[str] = []
    slow: list[str] = []
    for dtype in REDUCED_DTYPES:
        if not _cpu_matmul_runs(dtype):
            continue
        (fast if _onednn_supports(dtype) else slow).append(dtype)
    return tuple(fast), tuple(slow)


def _cpu_matmul_runs(dtype: str) -> bool:
    try:
        a = torch.ones(8, 8, dtype=torch_dtype(dtype))
        return bool(torch.isfinite(torch.matmul(a, a).float()).all())
    except Exception:  # "not implemented for 'Half'" and the like
        return False


def _onednn_supports(dtype: str) -> bool:
    check = {"bf16": "_is_mkldnn_bf16_supported", "fp16": "_is_mkldnn_fp16_supported"}[dtype]
    try:
        return bool(getattr(torch.ops.mkldnn, check)())
    except Exception:  # no such op in this build (non-x86, old torch): trust that it ran
        return True


def _torch_threads() -> int | None:
    try:
        return torch.get_num_threads()
    except Exception:
        return None


def _torch_cpu_capability() -> str | None:
    try:
        return torch.backends.cpu.get_cpu_capability()
    except Exception:
        return None


def _cuda_device(index: int) -> DeviceInfo:
    props = torch.cuda.get_device_properties(index)
    uuid = str(getattr(props, "uuid", "") or "")
    facts = nvml.static_facts(nvml.handle_for_cuda_index(index, uuid))
    capability = (props.major, props.minor)
    sms = int(props.multi_processor_count)
    threads_per_sm = int(getattr(props, "max_threads_per_multi_processor", 0) or 0)
    details = {
        "capability": f"{props.major}.{props.minor}",
        "multiprocessors": sms,
        "cuda_version": torch.version.cuda,
        "driver_version": nvml.driver_version(),
        "memory_clock_mhz": facts.get("memory_clock_mhz"),
        "power_limit_w": facts.get("power_limit_w"),
        "uuid": uuid or None,
        "nvml": bool(facts),
    }
    return DeviceInfo(
        id=f"cuda:{index}",
        kind="cuda",
        name=props.name,
        cores=sms,
        threads=sms * threads_per_sm if threads_per_sm else sms,
        memory_bytes=int(props.total_memory),
        freq_mhz=facts.get("max_sm_clock_mhz"),
        compute_dtypes=cuda_compute_dtypes(capability),
        details=details,
    )


def cuda_compute_dtypes(capability: tuple[int, int]) -> tuple[str, ...]:
    """Formats with tensor-core or native matmul kernels: bf16 from sm_80, fp16 from sm_53."""
    dtypes = ["fp32"]
    if capability >= (8, 0):
        dtypes.append("bf16")
    if capability >= (5, 3):
        dtypes.append("fp16")
    return tuple(dtypes)
