"""What the host CPU is: model name, instruction-set flags that matter for matmul, clock.

Reads /proc/cpuinfo on Linux and falls back to `platform` elsewhere; never raises.
"""

from __future__ import annotations

import platform
from pathlib import Path

import psutil

# Flags that decide which matmul kernels a CPU can run (x86 and Arm spellings).
FLAGS_OF_INTEREST: tuple[str, ...] = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "amx_fp16",
    "asimd",
    "asimdhp",
    "asimddp",
    "bf16",
    "i8mm",
    "sve",
    "sve2",
)


def read_cpuinfo(path: str = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's `key: value` lines of /proc/cpuinfo ({} where there is none)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_name(cpuinfo: dict[str, str]) -> str:
    """The CPU's model string ("AMD EPYC 9654 96-Core Processor"), or the best stand-in."""
    for key in ("model name", "Model", "Hardware", "cpu model"):
        if cpuinfo.get(key):
            return cpuinfo[key]
    return platform.processor() or platform.machine() or "CPU"


def cpu_flags(cpuinfo: dict[str, str]) -> tuple[str, ...]:
    """The flags of FLAGS_OF_INTEREST this CPU reports, in that order."""
    present = set((cpuinfo.get("flags") or cpuinfo.get("Features") or "").split())
    return tuple(flag for flag in FLAGS_OF_INTEREST if flag in present)


def cpu_freq_mhz(cpuinfo: dict[str, str]) -> float | None:
    """The maximum (else current) clock in MHz, or None where nothing reports one."""
    try:
        freq = psutil.cpu_freq()
    except Exception:  # not implemented on some platforms / containers
        freq = None
    if freq is not None:
        for value in (freq.max, freq.current):
            if value and value > 0:
                return float(value)
    try:
        return float(cpuinfo["cpu MHz"])
    except (KeyError, ValueError):
        return None
