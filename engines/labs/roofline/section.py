"""The roofline lab's snapshot section: measured roofs, measured op points, the model placed."""

from __future__ import annotations

from inferlab.engines.dtypes import DTYPE_NAMES
from inferlab.engines.hardware.microbench import MeasuredPoint, MeasuredRoofs
from inferlab.engines.hardware.presets import list_hardware_presets
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.fields import Setting, check_settings, named, read_list, read_object
from inferlab.engines.trace.snapshot import lab_section as section
from inferlab.engines.trace.snapshot import section_field

ROOFLINE_DEFAULTS = {"dtype": "fp32", "presets": [], "model": "smollm2-135m", "context": 1024,
                     "weight_dtype": "fp32", "kv_dtype": "fp32"}


def _hardware_ids():
    return list_hardware_presets()


ROOFLINE_SETTINGS = {
    "dtype": Setting("str", choices=DTYPE_NAMES),
    "presets": Setting("str-list", choices=_hardware_ids),
    "model": Setting("str"),
    "context": Setting("int", 1, 1_000_000),  # the view's range
    "weight_dtype": Setting("str", choices=DTYPE_NAMES),
    "kv_dtype": Setting("str", choices=DTYPE_NAMES),
}


def roofline_section(settings: dict, roofs: MeasuredRoofs | None, points, model_config=None) -> dict:
    state = {"roofs": roofs.to_dict() if roofs is not None else None,
             "measured_points": [p.to_dict() for p in points],
             "model_config": model_config.to_dict() if model_config is not None else None}
    metrics = {}
    if roofs is not None:
        metrics = {"peak_flops": dict(roofs.peak_flops),
                   "bandwidth_bytes_per_s": roofs.bw_bytes_per_s,
                   "knee_flops_per_byte": {k: v / roofs.bw_bytes_per_s for k, v in roofs.peak_flops.items()}}
    return section(settings, state, metrics)


def read_roofline_section(sec: dict):
    """(settings, MeasuredRoofs or None, [MeasuredPoint], ModelConfig or None); ValueError
    names the bad field."""
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
    settings = check_settings(settings, ROOFLINE_SETTINGS, ROOFLINE_DEFAULTS,
                              f"{where}.settings")
    return settings, roofs, points, cfg


def _point(d, where: str) -> MeasuredPoint:
    with named(where):
        return MeasuredPoint.from_dict(d)
