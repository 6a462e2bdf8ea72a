"""The memory (KV/VRAM) lab's snapshot section (`labs.memory`): the model's description,
the target device and the plan; and its strict reader."""

from __future__ import annotations

from inferlab.engines.fields import named, read_fields, read_object
from inferlab.engines.labs.memory.records import TARGET_FIELDS, TARGET_OPTIONAL, MemorySnapshot
from inferlab.engines.labs.memory.settings import check_memory_settings
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.trace.snapshot import lab_section, section_field

METRICS = ("kv_bytes_per_token", "kv_bytes_total", "weight_bytes", "total_bytes", "max_batch",
           "max_context")


def memory_section(settings: dict, model_config: ModelConfig, plan, target: dict) -> dict:
    """`target`: {"id", "label", "memory_bytes", "bw_bytes_per_s"} of the chosen device."""
    state = {"model_config": model_config.to_dict(), "target": target, "plan": plan.to_dict()}
    metrics = {k: plan.to_dict()[k] for k in METRICS}
    return lab_section(settings, state, metrics)


def read_memory_section(sec: dict) -> MemorySnapshot:
    """A snapshot's `labs.memory` as a MemorySnapshot; ValueError names the bad field."""
    read_object(sec, "labs.memory")
    settings = section_field(sec, "settings", "labs.memory")
    state = read_object(section_field(sec, "state", "labs.memory"), "labs.memory.state")
    raw_cfg = section_field(state, "model_config", "labs.memory.state")
    with named("labs.memory.state.model_config"):
        cfg = ModelConfig.from_dict(raw_cfg)
    target = read_fields(section_field(state, "target", "labs.memory.state"), TARGET_FIELDS,
                         "labs.memory.state.target", optional=TARGET_OPTIONAL)
    settings = check_memory_settings(settings, "labs.memory.settings")
    return MemorySnapshot(settings, cfg, target)
