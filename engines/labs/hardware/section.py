"""The hardware lab's snapshot section (`labs.hardware`): devices, telemetry history and
measured roofs; and its strict reader."""

from __future__ import annotations

from inferlab.engines.fields import named, read_list, read_map, read_object
from inferlab.engines.hardware.microbench import MeasuredRoofs
from inferlab.engines.hardware.telemetry import TelemetryHistory
from inferlab.engines.labs.hardware.records import HardwareSnapshot, read_device
from inferlab.engines.labs.hardware.settings import check_hardware_settings
from inferlab.engines.trace.snapshot import lab_section, section_field


def hardware_section(settings: dict, devices, history: TelemetryHistory | None,
                     roofs: dict) -> dict:
    """`roofs`: device id → MeasuredRoofs."""
    metrics = {dev: r.to_dict() for dev, r in roofs.items()}
    state = {"devices": [d.to_dict() for d in devices],
             "telemetry": history.to_dict() if history is not None else None,
             "roofs": metrics}
    return lab_section(settings, state, {"roofs": metrics})


def _roofs(d, where: str) -> MeasuredRoofs:
    with named(where):
        return MeasuredRoofs.from_dict(d)


def read_hardware_section(sec: dict) -> HardwareSnapshot:
    """A snapshot's `labs.hardware` as a HardwareSnapshot; ValueError names the bad field."""
    where = "labs.hardware"
    read_object(sec, where)
    settings = check_hardware_settings(section_field(sec, "settings", where),
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
    return HardwareSnapshot(settings, tuple(devices), history, roofs)
