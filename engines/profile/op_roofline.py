"""A trace's ops on a roofline: each CPU op that torch.profiler recorded with shapes
(`record_shapes=True`), costed from them by `roofline.aten_costs.aten_op_cost` (the roofline
lab's own cost functions), grouped by name and shapes, and set against a device's roof:

    time at the roof  t_roof = max(flops / peak(dtype), bytes / bandwidth)
    achieved          flops / t and bytes / t over the group's summed time t
    of the roof       t_roof / t (1.0: the op ran at its roof)

Each piece of work counts once (`counted_once`): aten::linear holding aten::addmm is the addmm;
the bias copy inside that addmm is part of it.
The roof is this machine's measured one or a datasheet preset's (`Roof.from_measured`,
`Roof.from_preset`); an op in a dtype the roof has no peak for is set against its fp32 peak,
and says so (`peak_dtype`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferlab.engines.profile.chrome_trace import TraceEvent
from inferlab.engines.profile.kernel_table import CPU_CATS
from inferlab.engines.roofline.aten_costs import ATTENTION, MATMULS, aten_op_cost
from inferlab.engines.roofline.formulas import predicted_time_s

TORCH_DTYPES = {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16",
                "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "signed char": "int8"}
"""torch.profiler's `Input type` names -> the roofs' dtype names (engines/dtypes)."""


@dataclass(frozen=True)
class Roof:
    name: str  # "measured cpu" or a preset's id
    peak_flops: Mapping[str, float]  # dtype -> FLOP/s
    bw_bytes_per_s: float

    @classmethod
    def from_measured(cls, roofs) -> Roof:
        """hardware.microbench.MeasuredRoofs"""
        return cls(f"measured {roofs.device}", dict(roofs.peak_flops), roofs.bw_bytes_per_s)

    @classmethod
    def from_preset(cls, preset) -> Roof:
        """hardware.presets.HardwarePreset"""
        return cls(preset.id, dict(preset.peak_flops), preset.bandwidth_bytes_per_s)

    def peak_for(self, dtype: str) -> tuple[str, float]:
        """(the dtype whose peak is used, its FLOP/s): `dtype`'s, else fp32's."""
        if dtype in self.peak_flops:
            return dtype, self.peak_flops[dtype]
        return "fp32", self.peak_flops.get("fp32", max(self.peak_flops.values()))

    def to_dict(self) -> dict:
        return {"name": self.name, "peak_flops": dict(self.peak_flops),
                "bw_bytes_per_s": self.bw_bytes_per_s}


@dataclass(frozen=True)
class OpPoint:
    """One op name and shapes: its calls summed."""

    name: str
    shapes: str  # the recorded Input Dims and types, as one line
    dtype: str
    peak_dtype: str
    calls: int
    time_s: float
    flops: float
    bytes: float
    at_roof_s: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes > 0 else float("inf")

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.bytes / self.time_s if self.time_s > 0 else 0.0

    @property
    def of_roof(self) -> float:
        return self.at_roof_s / self.time_s if self.time_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {"name": self.name, "shapes": self.shapes, "dtype": self.dtype,
                "peak_dtype": self.peak_dtype, "calls": self.calls, "time_s": self.time_s,
                "flops": self.flops, "bytes": self.bytes, "intensity": self.intensity,
                "achieved_flops_per_s": self.achieved_flops_per_s,
                "achieved_bytes_per_s": self.achieved_bytes_per_s,
                "at_roof_s": self.at_roof_s, "of_roof": self.of_roof}


def family(name: str) -> str:
    """matmul, attention or elementwise: what an aten op's cost counts."""
    if name in MATMULS:
        return "matmul"
    return "attention" if name in ATTENTION else "elementwise"


def counted_once(events: Sequence[TraceEvent]) -> list[TraceEvent]:
    """The costed events that carry the work, each piece once. torch's CPU ops nest properly
    on a thread: an op holding one of its own family gives way to it (aten::linear to its
    aten::addmm, SDPA to its flash kernel); an op of another family inside a kept one is
    part of it (addmm's bias copy, the math SDPA's bmm and softmax)."""
    lanes: dict[tuple, list[TraceEvent]] = {}
    for e in events:
        lanes.setdefault((e.pid, e.tid), []).append(e)
    dropped: set[int] = set()
    for lane in lanes.values():
        lane.sort(key=lambda e: (e.ts_us, -e.dur_us))
        open_ops: list[TraceEvent] = []
        for e in lane:
            while open_ops and open_ops[-1].end_us <= e.ts_us:
                open_ops.pop()
            if open_ops:
                parent = open_ops[-1]
                if family(parent.name) == family(e.name):
                    dropped.add(id(parent))
                else:
                    dropped.add(id(e))
            open_ops.append(e)
    return [e for e in events if id(e) not in dropped]


def op_points(events: Sequence[TraceEvent], roof: Roof) -> list[OpPoint]:
    """The costed CPU ops of `events`, grouped by name and shapes, most time first."""
    costed = []
    for e in events:
        if e.cat not in CPU_CATS or "Input Dims" not in e.args:
            continue
        dims, types = e.args.get("Input Dims"), e.args.get("Input type", [])
        if not isinstance(dims, list) or not isinstance(types, list):
            continue
        cost = aten_op_cost(e.name, dims, types)
        if cost is not None:
            costed.append((e, cost))
    keep = {id(e) for e in counted_once([e for e, _ in costed])}
    groups: dict[tuple, list] = {}
    for e, cost in costed:
        if id(e) not in keep:
            continue
        types = e.args.get("Input type", [])
        key = (e.name, f"{e.args['Input Dims']} {types}")
        group = groups.setdefault(key, [0, 0.0, 0.0, 0.0, _dtype(types)])
        group[0] += 1
        group[1] += e.dur_us / 1e6
        group[2] += cost.flops
        group[3] += cost.bytes_moved
    points = []
    for (name, shapes), (calls, time_s, flops, moved, dtype) in groups.items():
        peak_dtype, peak = roof.peak_for(dtype)
        points.append(OpPoint(name, shapes, dtype, peak_dtype, calls, time_s, flops, moved,
                              predicted_time_s(flops, moved, peak, roof.bw_bytes_per_s)))
    points.sort(key=lambda p: (-p.time_s, p.name, p.shapes))
    return points


def _dtype(types: list) -> str:
    for t in types:
        if t in TORCH_DTYPES:
            return TORCH_DTYPES[t]
    return "fp32"
