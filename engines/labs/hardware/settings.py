"""The hardware lab's settings: the telemetry sampling rate, and the device the snapshot
shows (the window's compute device when it was taken)."""

from __future__ import annotations

from inferlab.engines.fields import Setting, check_settings

HARDWARE_DEFAULTS = {"sample_hz": 2.0}
HARDWARE_SETTINGS = {"sample_hz": Setting("float", 1.0, 10.0), "device": Setting("str")}


def check_hardware_settings(settings, where: str = "settings") -> dict:
    """`settings` over the defaults, every field checked (ValueError names the field)."""
    return check_settings(settings, HARDWARE_SETTINGS, HARDWARE_DEFAULTS, where)
