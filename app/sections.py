"""Each lab's snapshot section, built and read without Qt (the CLI writes them too).

A section is {"settings": {...}, "state": {...}, "metrics": {...}}. Builders take engine
records; readers turn a section back into those records and raise ValueError naming the
field that is wrong.
"""

from __future__ import annotations

from engines.hardware.microbench import MeasuredPoint, MeasuredRoofs
from engines.hardware.telemetry import TelemetryHistory
from engines.model.config import ModelConfig
from engines.roofline.memory import attention_variants, plan_memory
from engines.trace.snapshot import lab_section as section

MEMORY_DEFAULTS = {"model": "llama-3-8b", "context": 8192, "batch": 1, "weight_dtype": "fp16",
                   "kv_dtype": "fp16", "target": "h100-sxm", "utilization": 0.9}
ROOFLINE_DEFAULTS = {"dtype": "fp32", "presets": [], "model": "smollm2-135m", "context": 1024,
                     "weight_dtype": "fp32", "kv_dtype": "fp32"}


def _get(mapping: dict, key: str, where: str):
    if not isinstance(mapping, dict) or key not in mapping:
        raise ValueError(f"{where}: missing field {key!r}")
    return mapping[key]


# hardware ----------------------------------------------------------------------------------------
def hardware_section(settings: dict, devices, history: TelemetryHistory | None, roofs: dict) -> dict:
    """`roofs`: device id → MeasuredRoofs."""
    metrics = {dev: r.to_dict() for dev, r in roofs.items()}
    state = {"devices": [d.to_dict() for d in devices],
             "telemetry": history.to_dict() if history is not None else None,
             "roofs": metrics}
    return section(settings, state, {"roofs": metrics})


def read_hardware_section(sec: dict) -> tuple[list[dict], TelemetryHistory | None, dict]:
    state = _get(sec, "state", "labs.hardware")
    devices = _get(state, "devices", "labs.hardware.state")
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise ValueError("labs.hardware.state.devices: expected a list of objects")
    raw = state.get("telemetry")
    history = TelemetryHistory.from_dict(raw) if raw else None
    roofs = {dev: MeasuredRoofs.from_dict(r) for dev, r in (state.get("roofs") or {}).items()}
    return devices, history, roofs


# roofline ----------------------------------------------------------------------------------------
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
    settings = _get(sec, "settings", "labs.roofline")
    state = _get(sec, "state", "labs.roofline")
    raw = state.get("roofs")
    roofs = MeasuredRoofs.from_dict(raw) if raw else None
    points = [MeasuredPoint.from_dict(p) for p in state.get("measured_points") or []]
    cfg_raw = state.get("model_config")
    cfg = ModelConfig.from_dict(cfg_raw) if cfg_raw else None
    return dict(ROOFLINE_DEFAULTS) | dict(settings), roofs, points, cfg


# memory ----
def preset_target(preset) -> dict:
    """A hardware preset as a memory-lab target."""
    return {"id": preset.id, "label": preset.name,
            "memory_bytes": preset.memory_bytes, "bw_bytes_per_s": preset.bandwidth_bytes_per_s}


def memory_plans(settings: dict, cfg: ModelConfig, target: dict):
    """The plan for the settings, and the MHA/GQA/MQA variants' (config, plan) beside it."""
    kwargs = dict(context=int(settings["context"]), batch=int(settings["batch"]),
                  weight_dtype=settings["weight_dtype"], kv_dtype=settings["kv_dtype"],
                  device_memory_bytes=int(target["memory_bytes"]),
                  utilization=float(settings["utilization"]),
                  bw_bytes_per_s=target.get("bw_bytes_per_s"))
    plan = plan_memory(cfg, **kwargs)
    variants = {kind: (vcfg, plan_memory(vcfg, **kwargs)) for kind, vcfg in attention_variants(cfg).items()}
    return plan, variants



def memory_section(settings: dict, model_config: ModelConfig, plan, target: dict) -> dict:
    """`target`: {"id", "label", "memory_bytes", "bw_bytes_per_s"} of the chosen device."""
    state = {"model_config": model_config.to_dict(), "target": target, "plan": plan.to_dict()}
    metrics = {k: plan.to_dict()[k] for k in ("kv_bytes_per_token", "kv_bytes_total", "weight_bytes",
                                              "total_bytes", "max_batch", "max_context")}
    return section(settings, state, metrics)


def read_memory_section(sec: dict) -> tuple[dict, ModelConfig, dict]:
    settings = _get(sec, "settings", "labs.memory")
    state = _get(sec, "state", "labs.memory")
    cfg = ModelConfig.from_dict(_get(state, "model_config", "labs.memory.state"))
    target = _get(state, "target", "labs.memory.state")
    for key in ("label", "memory_bytes"):
        _get(target, key, "labs.memory.state.target")
    return dict(MEMORY_DEFAULTS) | dict(settings), cfg, target
