"""The hardware lab's records: a device as its table lists it (a DeviceInfo's dict, read
strictly), and `HardwareSnapshot`, a snapshot's `labs.hardware` read once. The telemetry
history and the measured roofs are engines/hardware's own records."""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.fields import Setting, read_fields, read_map, shown
from inferlab.engines.hardware.microbench import MeasuredRoofs
from inferlab.engines.hardware.telemetry import TelemetryHistory

_DETAIL_VALUE = (str, int, float, bool, type(None))


def _detail(value, where: str):
    """A device detail as the view lists it: a number, text, or a short list of them."""
    items = value if isinstance(value, list) else [value]
    if len(items) > 1000 or not all(isinstance(v, _DETAIL_VALUE) for v in items):
        raise ValueError(f"{where}: expected a number, text or a list of them, got "
                         f"{shown(value)}")
    for v in items:
        if isinstance(v, int | float) and not isinstance(v, bool):
            Setting("float", none=True).check(v, where)  # finite, within a double's range
    return value


_count = Setting("int", 0, none=True)
DEVICE_FIELDS = {  # a DeviceInfo's to_dict(), as the device table draws it
    "id": Setting("str", max_len=200), "kind": Setting("str", max_len=200),
    "name": Setting("str", max_len=1000), "cores": _count, "threads": _count,
    "memory_bytes": _count, "freq_mhz": Setting("float", 0, none=True),
    "compute_dtypes": Setting("str-list", max_len=100),
    "details": lambda v, w: read_map(v, _detail, w, 1000),
}


def read_device(d, where: str) -> dict:
    return read_fields(d, DEVICE_FIELDS, where, optional={"details": {}})


@dataclass(frozen=True)
class HardwareSnapshot:
    """A snapshot's `labs.hardware`, read: the settings as checked, the devices (DeviceInfo
    dicts), the telemetry history (None: none was recorded) and each device's measured roofs
    (device id -> MeasuredRoofs)."""

    settings: dict
    devices: tuple[dict, ...]
    telemetry: TelemetryHistory | None
    roofs: dict[str, MeasuredRoofs]

    def shown_device(self) -> dict | None:
        """The device the snapshot was taken on (`settings.device`), else the first listed."""
        chosen = self.settings.get("device")
        return next((d for d in self.devices if d.get("id") == chosen),
                    self.devices[0] if self.devices else None)
