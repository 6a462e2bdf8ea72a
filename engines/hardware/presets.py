"""Datasheet roofs: peak FLOP/s per dtype, memory bandwidth and capacity of known devices.

Presets are JSON files in `assets/hardware/<id>.json`, each naming its source (the vendor
datasheet). Peak figures are dense (no structured sparsity); capacities are in bytes as the
datasheet states them (GPU "GB" = 1e9 bytes, MCU "KB" = 1024 bytes; `notes` says which).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from inferlab.engines.dtypes import DTYPE_NAMES
from inferlab.engines.presets import dataclass_from_dict, load_preset, preset_ids

HARDWARE_KINDS = ("gpu", "cpu", "mcu")


@dataclass(frozen=True)
class HardwarePreset:
    """One device's datasheet roofs.

    `peak_flops` maps a dtype name (engines.dtypes) to dense FLOP/s (OP/s for int8);
    `bandwidth_bytes_per_s` is the main-memory (HBM, GDDR, SRAM) bandwidth.
    """

    id: str
    name: str
    kind: str
    peak_flops: dict[str, float] = field(hash=False)
    bandwidth_bytes_per_s: float
    memory_bytes: int
    source: str
    notes: str = ""

    def __post_init__(self) -> None:
        if self.kind not in HARDWARE_KINDS:
            raise ValueError(f"field 'kind' must be one of {HARDWARE_KINDS}, got {self.kind!r}")
        if not isinstance(self.peak_flops, dict) or not self.peak_flops:
            raise ValueError("field 'peak_flops' must be a non-empty {dtype: FLOP/s} object")
        for dtype, value in self.peak_flops.items():
            if dtype not in DTYPE_NAMES:
                raise ValueError(f"field 'peak_flops' has unknown dtype {dtype!r}; "
                                 f"expected one of {', '.join(DTYPE_NAMES)}")
            if not _is_number(value) or value <= 0:
                raise ValueError(f"field 'peak_flops.{dtype}' must be > 0, got {value!r}")
        if not _is_number(self.bandwidth_bytes_per_s) or self.bandwidth_bytes_per_s <= 0:
            raise ValueError(f"field 'bandwidth_bytes_per_s' must be > 0, "
                             f"got {self.bandwidth_bytes_per_s!r}")
        if (not isinstance(self.memory_bytes, int) or isinstance(self.memory_bytes, bool)
                or self.memory_bytes <= 0):
            raise ValueError(f"field 'memory_bytes' must be a positive integer, "
                             f"got {self.memory_bytes!r}")
        for name in ("id", "name", "source", "notes"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"field {name!r} must be a string")
        object.__setattr__(self, "peak_flops", {k: float(v) for k, v in self.peak_flops.items()})
        object.__setattr__(self, "bandwidth_bytes_per_s", float(self.bandwidth_bytes_per_s))

    @property
    def dtypes(self) -> list[str]:
        """The dtypes this device has a peak for."""
        return list(self.peak_flops)

    def peak_flops_for(self, dtype: str) -> float:
        """Dense peak FLOP/s in `dtype`; a dtype without a datasheet figure is an error."""
        if dtype not in self.peak_flops:
            raise ValueError(f"{self.id} has no peak for {dtype!r}; "
                             f"known: {', '.join(self.peak_flops)}")
        return self.peak_flops[dtype]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Any, origin: str = "hardware preset") -> HardwarePreset:
        """Build from a dict (as `to_dict` writes it); errors start with `origin`."""
        return dataclass_from_dict(cls, d, origin)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def list_hardware_presets() -> list[str]:
    """Ids of the hardware presets shipped in assets/hardware, sorted."""
    return preset_ids("hardware")


def load_hardware_preset(id: str) -> HardwarePreset:
    """The preset `id` from assets/hardware/<id>.json; unknown ids list the known ones."""
    return load_preset("hardware", id, "hardware preset", HardwarePreset.from_dict)


def all_hardware_presets() -> list[HardwarePreset]:
    """Every shipped preset, in id order."""
    return [load_hardware_preset(i) for i in list_hardware_presets()]
