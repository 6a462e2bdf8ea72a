"""A trace the step lab's Trace tab opened, in its snapshot section (`labs.step.state.trace`):
written as `TraceProfile.to_dict()` (what `inferlab profile open --json` prints: the kernel
table keyed by name, the breakdown keyed by lane, the roof and its ops) and read back strictly
into the same `TraceProfile` (ValueError naming the field). The figures derived from the
stored ones (an op's intensity, achieved rates, share of its roof) are recomputed, not read."""

from __future__ import annotations

from inferlab.engines.fields import (
    Setting,
    read_dataclass,
    read_list,
    read_map,
    read_object,
    shown,
)
from inferlab.engines.profile.breakdown import LaneTime
from inferlab.engines.profile.kernel_table import KernelRow
from inferlab.engines.profile.op_roofline import OpPoint, Roof
from inferlab.engines.profile.trace_profile import TraceProfile
from inferlab.engines.trace.snapshot import section_field

MAX_ROWS = 1_000_000
SECONDS = Setting("float", 0, 1e9)
FLOPS = Setting("float", 0)
LEVELS = ("gpu", "cpu")
LANE_KINDS = ("stream", "thread")


def _id(value, where: str) -> int | str:
    """A trace's pid or tid: an integer or a name."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{where}: expected an integer or a string, got {shown(value)}")
    if isinstance(value, str):
        Setting("str", max_len=256).check(value, where)
    return value


def _kernel(name: str, value, where: str) -> KernelRow:
    read_object(value, where)
    return read_dataclass(KernelRow, dict(value, name=name), where, {
        "name": Setting("str", max_len=4096), "calls": Setting("int", 1, 2**62),
        "total_s": SECONDS, "mean_s": SECONDS, "share": Setting("float", 0, 1)})


def _kernels(value, where: str) -> tuple[KernelRow, ...]:
    read_object(value, where)
    rows = read_map(value, lambda v, w: v, where, MAX_ROWS)
    return tuple(_kernel(name, v, f"{where}[{shown(name, 40)}]") for name, v in rows.items())


def _lane(value, where: str) -> LaneTime:
    return read_dataclass(LaneTime, value, where, {
        "pid": _id, "tid": _id, "name": Setting("str", max_len=4096),
        "kind": Setting("str", choices=LANE_KINDS), "events": Setting("int", 0, 2**62),
        "span_s": SECONDS, "compute_s": SECONDS, "memory_s": SECONDS,
        "communication_s": SECONDS, "idle_s": SECONDS})


def _peaks(value, where: str) -> dict[str, float]:
    peaks = read_map(value, Setting("float", 1e-300), where, 64,
                     keys=Setting("str", max_len=32))
    if not peaks:
        raise ValueError(f"{where}: expected at least one dtype's peak")
    return peaks


def _roof(value, where: str) -> Roof:
    return read_dataclass(Roof, value, where, {
        "name": Setting("str", max_len=256), "peak_flops": _peaks,
        "bw_bytes_per_s": Setting("float", 1e-300)})


def _op(value, where: str) -> OpPoint:
    text = Setting("str", max_len=4096)
    return read_dataclass(OpPoint, value, where, {
        "name": text, "shapes": text, "dtype": Setting("str", max_len=32),
        "peak_dtype": Setting("str", max_len=32), "calls": Setting("int", 1, 2**62),
        "time_s": SECONDS, "flops": FLOPS, "bytes": FLOPS, "at_roof_s": SECONDS})


def read_trace(value, where: str) -> TraceProfile:
    """The stored trace profile; ValueError names a bad field."""
    read_object(value, where)
    head = {key: read(section_field(value, key, where), f"{where}.{key}") for key, read in (
        ("path", Setting("str", max_len=4096)), ("bytes", Setting("int", 0, 2**62)),
        ("events", Setting("int", 0, 2**62)), ("level", Setting("str", choices=LEVELS)))}
    kernels = _kernels(section_field(value, "kernels", where), f"{where}.kernels")
    lanes = read_map(section_field(value, "breakdown", where), _lane, f"{where}.breakdown",
                     MAX_ROWS)
    roof, ops = None, ()
    if "roofline" in value:
        roofline = read_object(value["roofline"], f"{where}.roofline")
        roof = _roof(section_field(roofline, "roof", f"{where}.roofline"),
                     f"{where}.roofline.roof")
        ops = tuple(read_list(section_field(roofline, "ops", f"{where}.roofline"), _op,
                              f"{where}.roofline.ops", MAX_ROWS))
    return TraceProfile(head["path"], head["bytes"], head["events"], head["level"], kernels,
                        tuple(lanes.values()), roof, ops)
