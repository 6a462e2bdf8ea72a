"""OpCost: what an operation costs, as the roofline sees it (FLOPs and bytes moved)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from inferlab.engines.roofline import formulas


@dataclass(frozen=True)
class OpCost:
    """FLOPs an operation performs and bytes it moves to and from memory, once each."""

    name: str
    flops: float
    bytes_moved: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP/byte (formulas.arithmetic_intensity)."""
        return float(formulas.arithmetic_intensity(self.flops, self.bytes_moved))

    def attainable_flops(self, peak_flops: float, bw_bytes_per_s: float) -> float:
        """FLOP/s the roofline allows this op on a device (formulas.attainable_flops)."""
        return float(formulas.attainable_flops(peak_flops, bw_bytes_per_s, self.intensity))

    def predicted_time_s(self, peak_flops: float, bw_bytes_per_s: float) -> float:
        """Roofline time on a device (formulas.predicted_time_s)."""
        return float(formulas.predicted_time_s(self.flops, self.bytes_moved, peak_flops,
                                               bw_bytes_per_s))

    def bound(self, peak_flops: float, bw_bytes_per_s: float) -> str:
        """"memory" or "compute" on a device (formulas.bound)."""
        return formulas.bound(self.flops, self.bytes_moved, peak_flops, bw_bytes_per_s)

    def to_dict(self) -> dict[str, Any]:
        """name, flops, bytes_moved and the derived intensity."""
        return {"name": self.name, "flops": self.flops, "bytes_moved": self.bytes_moved,
                "intensity": self.intensity}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OpCost:
        """Inverse of to_dict (the derived intensity is ignored)."""
        return cls(name=str(d["name"]), flops=float(d["flops"]),
                   bytes_moved=float(d["bytes_moved"]))


def sum_costs(name: str, parts: Iterable[OpCost]) -> OpCost:
    """One OpCost for operations run one after another: FLOPs add, bytes add."""
    parts = list(parts)
    return OpCost(name, float(sum(p.flops for p in parts)),
                  float(sum(p.bytes_moved for p in parts)))
