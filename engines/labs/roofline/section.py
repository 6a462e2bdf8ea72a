"""The roofline lab's snapshot section (`labs.roofline`): measured roofs, measured operation
points, the model placed; and its strict reader."""

from __future__ import annotations

from inferlab.engines.fields import named, read_list, read_object
from inferlab.engines.hardware.microbench import MeasuredPoint, MeasuredRoofs
from inferlab.engines.labs.roofline.records import RooflineSnapshot
from inferlab.engines.labs.roofline.settings import check_roofline_settings
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.trace.snapshot import lab_section, section_field


def roofline_section(settings: dict, roofs: MeasuredRoofs | None, points,
                     model_config=None) -> dict:
    state = {"roofs": roofs.to_dict() if roofs is not None else None,
             "measured_points": [p.to_dict() for p in points],
             "model_config": model_config.to_dict() if model_config is not None else None}
    metrics = {}
    if roofs is not None:
        metrics = {"peak_flops": dict(roofs.peak_flops),
                   "bandwidth_bytes_per_s": roofs.bw_bytes_per_s,
                   "knee_flops_per_byte": {k: v / roofs.bw_bytes_per_s
                                           for k, v in roofs.peak_flops.items()}}
    return lab_section(settings, state, metrics)


def read_roofline_section(sec: dict) -> RooflineSnapshot:
    """A snapshot's `labs.roofline` as a RooflineSnapshot; ValueError names the bad field."""
    where = "labs.roofline"
    read_object(sec, where)
    settings = section_field(sec, "settings", where)
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    raw = state.get("roofs")
    roofs = None
    if raw:
        with named(f"{where}.state.roofs"):
            roofs = MeasuredRoofs.from_dict(raw)
        if "fp32" not in roofs.peak_flops:  # what the plot falls back to for other dtypes
            raise ValueError(f"{where}.state.roofs.peak_flops: expected an fp32 peak (every "
                             f"device measures one), got {', '.join(roofs.peak_flops)}")
    points = read_list(state.get("measured_points") or [], _point,
                       f"{where}.state.measured_points", 10_000)
    cfg_raw = state.get("model_config")
    cfg = None
    if cfg_raw:
        with named(f"{where}.state.model_config"):
            cfg = ModelConfig.from_dict(cfg_raw)
    settings = check_roofline_settings(settings, f"{where}.settings")
    return RooflineSnapshot(settings, roofs, tuple(points), cfg)


def _point(d, where: str) -> MeasuredPoint:
    with named(where):
        return MeasuredPoint.from_dict(d)
