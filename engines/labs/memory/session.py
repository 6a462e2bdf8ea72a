"""The memory (KV/VRAM) lab's snapshot section and the plans it draws."""

from __future__ import annotations

from inferlab.engines.dtypes import DTYPE_NAMES
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.memory import (
    MAX_BW_BYTES_PER_S,
    MAX_BYTES,
    attention_variants,
)
from inferlab.engines.roofline.parallel import plan_gpu_share
from inferlab.engines.fields import Setting, check_settings, named, read_fields, read_object
from inferlab.engines.trace.snapshot import lab_section as section
from inferlab.engines.trace.snapshot import section_field

MEMORY_DEFAULTS = {"model": "llama-3-8b", "context": 8192, "batch": 1, "weight_dtype": "fp16",
                   "kv_dtype": "fp16", "target": "h100-sxm", "utilization": 0.9,
                   "tp": 1, "pp": 1}
MEMORY_SETTINGS = {  # the view's ranges
    "model": Setting("str"),
    "context": Setting("int", 1, 10_000_000),
    "batch": Setting("int", 1, 100_000),
    "weight_dtype": Setting("str", choices=DTYPE_NAMES),
    "kv_dtype": Setting("str", choices=DTYPE_NAMES),
    "target": Setting("str"),
    "utilization": Setting("float", 0.05, 1.0),
    "tp": Setting("int", 1, 1024),  # tensor-parallel degree: the plan is one GPU's
    "pp": Setting("int", 1, 1024),  # pipeline stages
}


def preset_target(preset) -> dict:
    """A hardware preset as a memory-lab target."""
    return {"id": preset.id, "label": preset.name,
            "memory_bytes": preset.memory_bytes, "bw_bytes_per_s": preset.bandwidth_bytes_per_s}


def memory_plans(settings: dict, cfg: ModelConfig, target: dict):
    """The plan for the settings, and the MHA/GQA/MQA variants' (config, plan) beside it."""
    """One GPU's plan under the settings' tensor degree t and pipeline stages p
    (roofline.parallel.plan_gpu_share; ValueError when t does not split the heads)."""
    kwargs = dict(context=int(settings["context"]), batch=int(settings["batch"]),
                  weight_dtype=settings["weight_dtype"], kv_dtype=settings["kv_dtype"],
                  device_memory_bytes=int(target["memory_bytes"]),
                  utilization=float(settings["utilization"]),
                  bw_bytes_per_s=target.get("bw_bytes_per_s"))
    tp, pp = int(settings.get("tp", 1)), int(settings.get("pp", 1))
    plan = plan_gpu_share(cfg, tp=tp, pp=pp, **kwargs)
    variants = {}
    for kind, vcfg in attention_variants(cfg).items():
        try:  # t may split the model's KV heads but not MQA's one (it is replicated) etc.
            variants[kind] = (vcfg, plan_gpu_share(vcfg, tp=tp, pp=pp, **kwargs))
        except ValueError:
            continue
    return plan, variants



def memory_section(settings: dict, model_config: ModelConfig, plan, target: dict) -> dict:
    """`target`: {"id", "label", "memory_bytes", "bw_bytes_per_s"} of the chosen device."""
    state = {"model_config": model_config.to_dict(), "target": target, "plan": plan.to_dict()}
    metrics = {k: plan.to_dict()[k] for k in ("kv_bytes_per_token", "kv_bytes_total", "weight_bytes",
                                              "total_bytes", "max_batch", "max_context")}
    return section(settings, state, metrics)


TARGET_FIELDS = {  # preset_target's, as the plan and the device chooser read them
    "id": Setting("str", max_len=200), "label": Setting("str", max_len=1000),
    "memory_bytes": Setting("int", 0, MAX_BYTES),
    "bw_bytes_per_s": Setting("float", 0, MAX_BW_BYTES_PER_S, none=True),
}


def read_memory_section(sec: dict) -> tuple[dict, ModelConfig, dict]:
    """(settings, ModelConfig, target); ValueError names the bad field."""
    read_object(sec, "labs.memory")
    settings = section_field(sec, "settings", "labs.memory")
    state = read_object(section_field(sec, "state", "labs.memory"), "labs.memory.state")
    raw_cfg = section_field(state, "model_config", "labs.memory.state")
    with named("labs.memory.state.model_config"):
        cfg = ModelConfig.from_dict(raw_cfg)
    target = read_fields(section_field(state, "target", "labs.memory.state"), TARGET_FIELDS,
                         "labs.memory.state.target",
                         optional={"id": "snapshot", "bw_bytes_per_s": None})
    settings = check_settings(settings, MEMORY_SETTINGS, MEMORY_DEFAULTS, "labs.memory.settings")
    return settings, cfg, target
