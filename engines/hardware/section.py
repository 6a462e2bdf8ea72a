"""The hardware lab's snapshot section: devices, telemetry history, measured roofs."""

from __future__ import annotations

from inferlab.engines.hardware.microbench import MeasuredRoofs
from inferlab.engines.hardware.telemetry import TelemetryHistory
from inferlab.engines.settings import Setting, check_settings
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


def read_hardware_section(sec: dict) -> tuple[list[dict], TelemetryHistory | None, dict]:
    check_settings(sec.get("settings") or {}, HARDWARE_SETTINGS, HARDWARE_DEFAULTS,
                   "labs.hardware.settings")
    state = section_field(sec, "state", "labs.hardware")
    devices = section_field(state, "devices", "labs.hardware.state")
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise ValueError("labs.hardware.state.devices: expected a list of objects")
    raw = state.get("telemetry")
    history = TelemetryHistory.from_dict(raw) if raw else None
    roofs = {dev: MeasuredRoofs.from_dict(r) for dev, r in (state.get("roofs") or {}).items()}
    return devices, history, roofs
