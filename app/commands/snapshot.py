"""`inferlab snapshot`: measure quickly, headless, and write a snapshot file."""

from __future__ import annotations

import time

from inferlab.app import __version__
from inferlab.app.about import host_facts
from inferlab.app.snapshot_io import save
from inferlab.engines.hardware.discovery import discover_devices, torch_device
from inferlab.engines.hardware.microbench import measure_op_points, measure_roofs
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.hardware.telemetry import TelemetrySampler
from inferlab.engines.labs.hardware.section import hardware_section
from inferlab.engines.labs.memory.section import memory_section
from inferlab.engines.labs.memory.session import memory_plans, preset_target
from inferlab.engines.labs.memory.settings import MEMORY_DEFAULTS
from inferlab.engines.labs.roofline.section import roofline_section
from inferlab.engines.labs.roofline.settings import ROOFLINE_DEFAULTS
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.trace.recorder import TraceRecorder
from inferlab.engines.trace.snapshot import make_snapshot


def register(sub) -> None:
    p = sub.add_parser("snapshot", help="measure quickly and write a snapshot (.json, also a Perfetto trace)")
    p.add_argument("--out", required=True, help="output .json file")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    p.add_argument("--full", action="store_true", help="full-size measurements (slower, exact)")
    p.set_defaults(func=run)


def build_snapshot(device: str = "cpu", quick: bool = True):
    """Every foundation lab's section from a fresh quick measurement, plus its trace."""

    torch_device(device)
    recorder = TraceRecorder()
    devices = discover_devices()
    sampler = TelemetrySampler(hz=10.0, capacity=64)
    with recorder.span("telemetry", cat="hardware"):
        for _ in range(5):
            sampler.sample_once()
            time.sleep(0.1)
    with recorder.span("measure roofs", cat="hardware", args={"device": device}):
        roofs = measure_roofs(device, quick=quick)
    with recorder.span("measure operations", cat="roofline"):
        points = measure_op_points(device, dtype="fp32", quick=quick)
    for point in points:
        recorder.counter("achieved GFLOP/s", {point.name: point.achieved_flops_per_s / 1e9})
    memory_settings = dict(MEMORY_DEFAULTS)
    cfg = load_model_preset(memory_settings["model"])
    target = preset_target(load_hardware_preset(memory_settings["target"]))
    plan, _variants = memory_plans(memory_settings, cfg, target)
    roofline_settings = dict(ROOFLINE_DEFAULTS, presets=["h100-sxm"])
    labs = {
        "hardware": hardware_section({"sample_hz": 10.0, "device": device}, devices,
                                              sampler.history(), {device: roofs}),
        "roofline": roofline_section(roofline_settings, roofs, points,
                                              load_model_preset(roofline_settings["model"])),
        "memory": memory_section(memory_settings, cfg, plan, target),
    }
    return make_snapshot(app_version=__version__, host=host_facts(),
                         devices=[d.to_dict() for d in devices], labs=labs,
                         trace_events=recorder.events(), active_lab="roofline")


def run(args) -> int:

    path = save(args.out, build_snapshot(args.device, quick=not args.full))
    print(path)
    return 0
