"""The hardware lab's snapshot section: devices, telemetry history, measured roofs."""

from __future__ import annotations

from inferlab.engines.hardware.microbench import MeasuredRoofs
from inferlab.engines.hardware.telemetry import TelemetryHistory
from inferlab.engines.fields import (
    Setting,
    check_settings,
    named,
    read_fields,
    read_list,
    read_map,
    read_object,
    shown,
)
from inferlab.engines.trace.snapshot import lab_section as section
from inferlab.engines.trace.snapshot import section_field

HARDWARE_DEFAULTS = {"sample_hz": 2.0}
HARDWARE_SETTINGS = {"sample_hz": Setting("float", 1.0, 10.0), "device": Setting("str")}


def hardware_section(settings: dict, devices, history: TelemetryHistory | None, roofs: dict) -> dict:
    """`roofs`: device id → MeasuredRoofs."""
    metrics = {dev: r.to_dict() for dev, r in roofs.items()}
    state = {"devices": [d.to_dict() for d in devices],
             "telemetry": history.to_dict() if history is not None else None,
             "roofs": metrics}
    return section(settings, state, {"roofs": metrics})


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


def _roofs(d, where: str) -> MeasuredRoofs:
    with named(where):
        return MeasuredRoofs.from_dict(d)


def read_hardware_section(sec: dict) -> tuple[list[dict], TelemetryHistory | None, dict]:
    """(devices: DeviceInfo dicts, TelemetryHistory or None, device id -> MeasuredRoofs);
    ValueError names the bad field."""
    where = "labs.hardware"
    read_object(sec, where)
    check_settings(section_field(sec, "settings", where), HARDWARE_SETTINGS, HARDWARE_DEFAULTS,
                   f"{where}.settings")
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    devices = read_list(section_field(state, "devices", f"{where}.state"), read_device,
                        f"{where}.state.devices", 1000)
    raw = state.get("telemetry")
    history = None
    if raw:
        with named(f"{where}.state.telemetry"):
            history = TelemetryHistory.from_dict(raw)
    roofs = read_map(state.get("roofs") or {}, _roofs, f"{where}.state.roofs", 1000)
    return devices, history, roofs
