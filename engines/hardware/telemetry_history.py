"""The telemetry sampler's record: time series of CPU, RAM and GPU readings.

Arrays are float64, one entry per sample, NaN where a reading is unknown (a GPU without
NVML, a power sensor that is not supported). Records validate their shapes when built, so a
snapshot that does not fit is refused with the name of the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# The per-GPU series, in the order nvml.read_gpu returns them.
GPU_SERIES: tuple[str, ...] = (
    "util_percent",
    "mem_used_bytes",
    "mem_total_bytes",
    "power_w",
    "sm_clock_mhz",
)


@dataclass(frozen=True, eq=False)
class GpuSeries:
    """One GPU's readings (1-D, one per sample of the history that holds it)."""

    id: str
    util_percent: np.ndarray
    mem_used_bytes: np.ndarray
    mem_total_bytes: np.ndarray
    power_w: np.ndarray
    sm_clock_mhz: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "id", str(self.id))
        length = None
        for name in GPU_SERIES:
            array = _array(f"gpus[{self.id}].{name}", getattr(self, name), 1, rows=length)
            length = array.shape[0]
            object.__setattr__(self, name, array)

    def __len__(self) -> int:
        return self.util_percent.shape[0]

    def to_dict(self) -> dict:
        return {"id": self.id} | {name: _jsonable(getattr(self, name)) for name in GPU_SERIES}

    @classmethod
    def from_dict(cls, data: dict) -> GpuSeries:
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise ValueError("telemetry history: each of 'gpus' must be an object with an 'id'")
        values = {}
        for name in GPU_SERIES:
            where = f"gpus[{data['id']}].{name}"
            values[name] = _from_list(where, _required(data, name, where))
        return cls(id=data["id"], **values)


@dataclass(frozen=True, eq=False)
class TelemetryHistory:
    """Readings oldest first; `t_s` is seconds since the sampler started."""

    t_s: np.ndarray  # (samples,)
    cpu_percent: np.ndarray  # (samples, logical cores)
    ram_used_bytes: np.ndarray  # (samples,)
    ram_total_bytes: int
    gpus: tuple[GpuSeries, ...] = ()

    def __post_init__(self):
        t_s = _array("t_s", self.t_s, 1)
        samples = t_s.shape[0]
        object.__setattr__(self, "t_s", t_s)
        object.__setattr__(self, "cpu_percent", _array("cpu_percent", self.cpu_percent, 2, samples))
        object.__setattr__(
            self, "ram_used_bytes", _array("ram_used_bytes", self.ram_used_bytes, 1, samples)
        )
        object.__setattr__(self, "ram_total_bytes", _count("ram_total_bytes", self.ram_total_bytes))
        gpus = tuple(self.gpus)
        for gpu in gpus:
            if not isinstance(gpu, GpuSeries):
                raise ValueError("telemetry history: field 'gpus' must hold GpuSeries records")
            if len(gpu) != samples:
                raise ValueError(
                    f"telemetry history: field 'gpus[{gpu.id}]' has {len(gpu)} samples, "
                    f"t_s has {samples}"
                )
        object.__setattr__(self, "gpus", gpus)

    def __len__(self) -> int:
        return self.t_s.shape[0]

    @property
    def cpu_cores(self) -> int:
        """Logical cores the CPU series has a column for."""
        return self.cpu_percent.shape[1]

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(gpu.id for gpu in self.gpus)

    def to_dict(self) -> dict:
        """JSON-safe dict: lists of numbers, None where a reading is NaN."""
        return {
            "t_s": _jsonable(self.t_s),
            "cpu_cores": self.cpu_cores,
            "cpu_percent": _jsonable(self.cpu_percent),
            "ram_used_bytes": _jsonable(self.ram_used_bytes),
            "ram_total_bytes": self.ram_total_bytes,
            "gpus": [gpu.to_dict() for gpu in self.gpus],
        }

    @classmethod
    def from_dict(cls, data: dict) -> TelemetryHistory:
        """Rebuild from `to_dict()` output; ValueError naming the first field that does not fit."""
        if not isinstance(data, dict):
            raise ValueError(f"telemetry history must be an object, got {type(data).__name__}")
        names = ("t_s", "cpu_cores", "cpu_percent", "ram_used_bytes", "ram_total_bytes", "gpus")
        for name in names:
            _required(data, name, name)
        cores = _count("cpu_cores", data["cpu_cores"])
        cpu = _from_list("cpu_percent", data["cpu_percent"])
        if cpu.size == 0 and cpu.ndim == 1:
            cpu = cpu.reshape(0, cores)  # no samples yet: keep the core count
        if cpu.ndim == 2 and cpu.shape[1] != cores:
            raise ValueError(
                f"telemetry history: field 'cpu_percent' has {cpu.shape[1]} columns, "
                f"cpu_cores says {cores}"
            )
        if not isinstance(data["gpus"], list):
            raise ValueError("telemetry history: field 'gpus' must be a list")
        return cls(
            t_s=_from_list("t_s", data["t_s"]),
            cpu_percent=cpu,
            ram_used_bytes=_from_list("ram_used_bytes", data["ram_used_bytes"]),
            ram_total_bytes=data["ram_total_bytes"],
            gpus=tuple(GpuSeries.from_dict(gpu) for gpu in data["gpus"]),
        )


def _required(data: dict, key: str, where: str):
    if key not in data:
        raise ValueError(f"telemetry history: missing field {where!r}")
    return data[key]


def _array(name: str, value, ndim: int, rows: int | None = None) -> np.ndarray:
    """`value` as a read-only float64 array of `ndim` dimensions and `rows` rows."""
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: past a double's range
        raise ValueError(f"telemetry history: field {name!r} is not a numeric array") from None
    if array.ndim != ndim:
        raise ValueError(
            f"telemetry history: field {name!r} must be {ndim}-D, got shape {array.shape}"
        )
    if rows is not None and array.shape[0] != rows:
        raise ValueError(
            f"telemetry history: field {name!r} has {array.shape[0]} samples, expected {rows}"
        )
    array.setflags(write=False)
    return array


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
            not 0 <= value < 2**63:
        raise ValueError(f"telemetry history: field {name!r} must be a non-negative integer")
    return int(value)


def _from_list(name: str, value) -> np.ndarray:
    """A JSON list (None = NaN) as float64."""
    if not isinstance(value, list):
        raise ValueError(f"telemetry history: field {name!r} must be a list")
    try:
        return np.array(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: past a double's range
        raise ValueError(f"telemetry history: field {name!r} is not a numeric array") from None


def _jsonable(array: np.ndarray) -> list:
    if array.ndim == 1:
        return [None if math.isnan(x) else x for x in array.tolist()]
    return [_jsonable(row) for row in array]
