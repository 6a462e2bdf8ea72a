"""The memory lab's records: a target device as its plan reads it, and `MemorySnapshot`, a
snapshot's `labs.memory` read once (the plans are computed from it: `session.memory_plans`)."""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.fields import Setting
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.memory import MAX_BW_BYTES_PER_S, MAX_BYTES

TARGET_FIELDS = {  # session.preset_target's, as the plan and the device chooser read them
    "id": Setting("str", max_len=200), "label": Setting("str", max_len=1000),
    "memory_bytes": Setting("int", 0, MAX_BYTES),
    "bw_bytes_per_s": Setting("float", 0, MAX_BW_BYTES_PER_S, none=True),
}
TARGET_OPTIONAL = {"id": "snapshot", "bw_bytes_per_s": None}


@dataclass(frozen=True)
class MemorySnapshot:
    """The settings as checked, the model's description, and the target device
    ({"id", "label", "memory_bytes", "bw_bytes_per_s"})."""

    settings: dict
    model_config: ModelConfig
    target: dict
