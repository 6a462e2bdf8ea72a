"""Link presets: the interconnect between two GPUs (NVLink, PCIe, InfiniBand, Ethernet), as
JSON files in assets/links/<id>.json, each naming its source. Bandwidth is one direction's,
in bytes/s; latency the fixed cost of one message, in seconds."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from inferlab.engines.presets import dataclass_from_dict, load_preset, preset_ids


@dataclass(frozen=True)
class LinkPreset:
    id: str
    name: str
    bandwidth_bytes_per_s: float
    latency_s: float
    source: str
    notes: str = ""

    def __post_init__(self) -> None:
        for name in ("bandwidth_bytes_per_s", "latency_s"):
            v = getattr(self, name)
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            if not ok or v < 0 or (name == "bandwidth_bytes_per_s" and v == 0):
                raise ValueError(f"field {name!r} must be a finite number "
                                 f"{'> 0' if name.startswith('band') else '>= 0'}, got {v!r}")
            object.__setattr__(self, name, float(v))
        for name in ("id", "name", "source", "notes"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"field {name!r} must be a string")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Any, origin: str = "link preset") -> LinkPreset:
        return dataclass_from_dict(cls, d, origin)


def list_link_presets() -> list[str]:
    return preset_ids("links")


def load_link_preset(link_id: str) -> LinkPreset:
    return load_preset("links", link_id, "link preset", LinkPreset.from_dict)
