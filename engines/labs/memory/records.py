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


@dataclass(frozen=True)
class KVKind:
    """One GPU's layers of one kind ("full", "sliding", "chunked"): `window` tokens held at
    most (0: all of them), their KV per token and per request of the plan's context."""

    kind: str
    layers: int
    window: int
    bytes_per_token: int
    bytes_per_request: int


@dataclass(frozen=True)
class ModelMemory:
    """What the model's own description changes in one GPU's plan (session.model_memory):
    its layers by kind, the KV a request would hold if every layer were global, MLA's values
    per token per layer, and a MoE's total, active and per-step weights."""

    kv_kinds: tuple[KVKind, ...]
    kv_bytes_all_global: int  # one request's KV if no layer had a window: context × per token
    kv_values_per_layer: int  # values one token stores in one layer (MLA: latent + RoPE key)
    params_total: int
    params_active: int  # per token
    weight_bytes_active_per_token: int  # one GPU's share
    experts_touched: float  # per MoE layer by a decode step of the plan's batch (0: dense)

    @property
    def windowed(self) -> bool:
        return any(k.window for k in self.kv_kinds)
