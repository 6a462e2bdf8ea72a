"""`inferlab run hardware`: the devices, a short telemetry recording and one device's
measured roofs, headless: the section the window exports.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from inferlab.engines.labs.hardware.section import hardware_section
from inferlab.engines.labs.hardware.session import (
    hardware_devices,
    hardware_roofs,
    record_telemetry,
)
from inferlab.engines.labs.hardware.settings import check_hardware_settings

SAMPLE_HZ = 10.0


def add_arguments(p) -> None:
    p.add_argument("--device", default="cpu", help="cpu or cuda:N: whose roofs are measured "
                                                   "(default cpu)")
    p.add_argument("--full", action="store_true",
                   help="full-size roof measurements (slower, exact; default quick sizes)")
    p.add_argument("--samples", type=int, default=5,
                   help=f"telemetry readings, {SAMPLE_HZ:g} a second (default 5)")


def run(args, recorder):
    """Discover the devices, record telemetry, measure the roofs of `--device`."""
    if args.samples < 1:
        raise ValueError(f"--samples: expected at least 1, got {args.samples}")
    settings = check_hardware_settings({"sample_hz": SAMPLE_HZ, "device": args.device})
    progress = getattr(args, "progress", None)
    devices = hardware_devices()
    with recorder.span("telemetry", cat="hardware", args={"samples": args.samples}):
        history = record_telemetry(args.samples, SAMPLE_HZ)
    with recorder.span("measure roofs", cat="hardware", args={"device": args.device}):
        roofs = hardware_roofs(args.device, quick=not args.full, progress=progress)
    section = hardware_section(settings, devices, history, {args.device: roofs})
    return section, roofs.to_dict() | {"devices": [d.id for d in devices],
                                       "telemetry_samples": int(history.t_s.size)}
