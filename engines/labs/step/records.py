"""The step lab's records and their JSON form.

`StepRunInfo` is what a run profiles (the model, the phase and its shape, the device, the roof
the ops are placed under); `ExecutionRecord` is one execution's profiled step: its ops
(`profile.step_ops.StepOp`), its time split (`profile.step_split`) and its output checked
against eager's; `StepSnapshot` is a snapshot section as read (section.py). Every record
checks its own fields when built or read, so a section's reader names the bad field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial

from inferlab.engines.fields import (
    Setting,
    as_tuple,
    check_fields,
    or_none,
    read_dataclass,
    read_list,
)
from inferlab.engines.labs.step.settings import EXECUTIONS, PHASES
from inferlab.engines.profile.step_ops import StepOp
from inferlab.engines.profile.step_split import Roof, StepSplit
from inferlab.engines.profile.trace_profile import TraceProfile

MAX_OPS = 1_000_000
MAX_LANES = 1024
SECONDS = Setting("float", 0, 1e6)
NUMBER = Setting("float", 0)
COUNT = Setting("int", 0, 2**62)
SPLIT_TOLERANCE_S = 1e-9
"""How far a read split's three parts may sum from its step time (rounding of its JSON)."""


def read_op(value, where: str) -> StepOp:
    return read_dataclass(StepOp, value, where, {
        "start_s": Setting("float", -1e6, 1e6), "dur_s": SECONDS,
        "flops": Setting("float", 0, none=True), "bytes": Setting("float", 0, none=True),
        "profiler_flops": Setting("float", 0, none=True),
        "layer": Setting("int", 0, 2**20, none=True)})


def read_roof(value, where: str) -> Roof:
    return read_dataclass(Roof, value, where, {
        "peak_flops": Setting("float", 1e-300), "bw_bytes_per_s": Setting("float", 1e-300)})


@dataclass(frozen=True)
class StepRunInfo:
    """What a run profiles: `rows` tokens in the step (decode: `batch`, one per sequence over
    `context` cached tokens each; prefill: `tokens`), on `device` with `threads` intra-op
    threads (`cpu_capability`: the instruction set torch's CPU ops run), under `roof`."""

    model: str
    model_name: str
    phase: str
    batch: int
    context: int
    tokens: int
    rows: int
    device: str
    threads: int
    cpu_capability: str
    roof: Roof

    def __post_init__(self):
        check_fields(self, {"phase": Setting("str", choices=PHASES)})

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, value, where: str) -> StepRunInfo:
        positive = Setting("int", 1, 2**31)
        return read_dataclass(cls, value, where, {
            "batch": positive, "context": Setting("int", 0, 2**31), "tokens": positive,
            "rows": positive, "threads": positive, "roof": read_roof})


@dataclass(frozen=True)
class ExecutionRecord:
    """One execution's profiled step: the kernel path its model runs (`kernel_path`), the
    step's wall time under the profiler (`step_s`, the median of `repeats`) and without it
    (`step_unprofiled_s`, median), the first call's time where it compiled (`compile_s`), the
    top-level ops and the lanes they ran on, the split (`split`: at_roof_s + inside_ops_s +
    between_ops_s = step_s), and the logits against the eager reference's (`max_abs_diff`;
    `matches`: within `tolerance`, absolute, 1e-5 of the largest eager logit
    `max_abs_logit`)."""

    execution: str
    kernel_path: str
    step_s: float
    step_unprofiled_s: float
    compile_s: float | None
    repeats: int
    ops: tuple[StepOp, ...]
    lanes: tuple[str, ...]
    split: StepSplit
    max_abs_diff: float
    max_abs_logit: float
    tolerance: float
    matches: bool

    def __post_init__(self):
        check_fields(self, {"execution": Setting("str", choices=EXECUTIONS),
                            "lanes": as_tuple(Setting("str-list", max_len=MAX_LANES))})
        s = self.split
        if abs(s.at_roof_s + s.inside_ops_s + s.between_ops_s - s.step_s) > SPLIT_TOLERANCE_S:
            raise ValueError(f"split: at_roof_s + inside_ops_s + between_ops_s = "
                             f"{s.at_roof_s + s.inside_ops_s + s.between_ops_s}, not its "
                             f"step_s {s.step_s}")
        unknown = {op.lane for op in self.ops} - set(self.lanes)
        if unknown:
            raise ValueError(f"ops: lanes {sorted(unknown)} are not in lanes {self.lanes}")

    @property
    def native_kernels(self) -> int:
        """How many of the ops are the native decoder's own kernels."""
        return sum(op.layer is not None for op in self.ops)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, value, where: str) -> ExecutionRecord:
        return read_dataclass(cls, value, where, {
            "step_s": SECONDS, "step_unprofiled_s": SECONDS,
            "compile_s": Setting("float", 0, 1e6, none=True), "repeats": Setting("int", 1, 101),
            "ops": lambda v, w: tuple(read_list(v, read_op, w, MAX_OPS)),
            "lanes": lambda v, w: v, "split": _read_split, "max_abs_diff": NUMBER,
            "max_abs_logit": NUMBER, "tolerance": NUMBER})


def _read_split(value, where: str) -> StepSplit:
    return read_dataclass(StepSplit, value, where, {
        name: SECONDS for name in ("step_s", "ops_s", "busy_s", "at_roof_s", "inside_ops_s",
                                   "between_ops_s")} | {"beats_roof": COUNT})


read_execution = ExecutionRecord.from_dict
read_executions = partial(read_list, item=read_execution, max_len=len(EXECUTIONS))
read_info = or_none(StepRunInfo.from_dict)


@dataclass(frozen=True)
class StepSnapshot:
    """A snapshot's `labs.step` as read: the settings as checked, the run (None before one)
    and its executions in the order they ran, and the trace the Trace tab had open (None:
    none)."""

    settings: dict
    info: StepRunInfo | None
    executions: tuple[ExecutionRecord, ...]
    trace: TraceProfile | None = None
