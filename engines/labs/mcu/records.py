"""The records the MCU lab's views draw: an arena layout per plan, per-op rows, runs.

Plain frozen dataclasses, no Qt: the lab builds them from engine objects (`session.py`),
the CLI writes them into snapshots, and a snapshot reads back into the same records, so a
replay needs neither the `.tflite` file nor a board. `to_dict` / `from_dict` are the
snapshot form; `from_dict` raises ValueError naming the field that is wrong.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from inferlab.engines.board.boards import BoardPreset, FitCheck
from inferlab.engines.fields import Setting, read_fields, read_list

GRAPH_INPUT = "graph input"
SCRATCH = "scratch"


_COUNT = Setting("int", 0)
_MAYBE_COUNT = Setting("int", 0, none=True)
_TEXT = Setting("str", max_len=10_000)
_MS = Setting("float", 0)
_MAYBE_MS = Setting("float", 0, none=True)
_SHAPE = Setting("int-list", 0, max_len=16)


def _step_water(v, where: str) -> tuple[int, int]:
    if not (isinstance(v, list) and len(v) == 2):
        raise ValueError(f"{where}: expected [step, bytes]")
    return _COUNT(v[0], f"{where}[0]"), _COUNT(v[1], f"{where}[1]")


@dataclass(frozen=True)
class ArenaTensor:
    """One planned buffer: `size` bytes at `offset`, live from step `first` to `last`.

    `kind` is what it is coloured by: the type of the op that produces it ("CONV_2D"),
    "graph input", or "scratch" (a kernel's scratch buffer, `producer` is its op).
    """

    name: str
    size: int
    offset: int
    first: int
    last: int
    tensor: int | None = None
    shape: tuple[int, ...] = ()
    dtype: str = ""
    producer: int | None = None
    kind: str = GRAPH_INPUT
    alias_of: str = ""  # in-place: the tensor whose bytes this one shares

    @property
    def end(self) -> int:
        return self.offset + self.size

    def producer_text(self) -> str:
        if self.producer is None:
            return self.kind
        if self.kind == SCRATCH:
            return f"scratch of op {self.producer}"
        return f"op {self.producer} ({self.kind})"

    def describe(self, step_labels=()) -> str:
        """Several lines for a tooltip: everything a user asks of a rectangle."""
        shape = "×".join(str(d) for d in self.shape) if self.shape else "—"
        steps = f"live steps {self.first} … {self.last}"
        if 0 <= self.first <= self.last < len(step_labels):
            steps += f" ({step_labels[self.first]} … {step_labels[self.last]})"
        return (f"{self.name}\n"
                f"shape {shape}, {self.dtype or '—'}, {self.size:,} B "
                f"({_kib(self.size)})\n"
                f"offset {self.offset:,} … {self.end:,} B\n"
                f"{steps}\n"
                f"produced by {self.producer_text()}"
                + (f"\nin place: shares the bytes of {self.alias_of}" if self.alias_of else ""))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"shape": list(self.shape)}

    @classmethod
    def from_dict(cls, d, where: str = "tensor") -> ArenaTensor:
        f = read_fields(d, TENSOR_FIELDS, where, optional=TENSOR_OPTIONAL)
        return cls(**f | {"shape": tuple(f["shape"])})


TENSOR_FIELDS = {"name": _TEXT, "size": _COUNT, "offset": _COUNT, "first": _COUNT,
                 "last": _COUNT, "tensor": _MAYBE_COUNT, "shape": _SHAPE, "dtype": _TEXT,
                 "producer": _MAYBE_COUNT, "kind": _TEXT, "alias_of": _TEXT}
TENSOR_OPTIONAL = {"tensor": None, "shape": [], "dtype": "", "producer": None,
                   "kind": GRAPH_INPUT, "alias_of": ""}


@dataclass(frozen=True)
class ArenaLayout:
    """One planner's arena for one model, over the steps 0..steps-1.

    `step_labels[s]` says what runs at step s ("inputs", "CONV_2D#3", "patch 2: CONV_2D#1"):
    in stored order op i runs at step i + 1; reordered and patch-based plans differ.
    """

    planner: str
    arena_bytes: int
    lower_bound_bytes: int
    steps: int
    tensors: tuple[ArenaTensor, ...]
    high_water: tuple[tuple[int, int], ...]  # (step, highest byte in use)
    plan_ms: float = 0.0
    step_labels: tuple[str, ...] = ()
    stored_order: bool = True  # op i at step i + 1

    def step_label(self, step: int) -> str:
        return self.step_labels[step] if 0 <= step < len(self.step_labels) else ""

    def describe(self, tensor: ArenaTensor) -> str:
        return tensor.describe(self.step_labels)

    def tensor_at(self, step: float, offset: float) -> ArenaTensor | None:
        """The buffer drawn at (x = step, y = offset), if any (the smallest on overlaps)."""
        hits = [t for t in self.tensors
                if t.first <= step < t.last + 1 and t.offset <= offset < t.end]
        return min(hits, key=lambda t: t.size) if hits else None

    def title(self) -> str:
        if self.arena_bytes == self.lower_bound_bytes:
            verdict = "at the lower bound"
        else:
            ratio = self.arena_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0
            verdict = f"{ratio:.2f}× the lower bound ({_kib(self.lower_bound_bytes)})"
        size = f"{self.arena_bytes:,} B" + (f" ({_kib(self.arena_bytes)})" if self.arena_bytes >= 1024 else "")
        return f"{self.planner}: {size}, {verdict}"

    def to_dict(self) -> dict:
        return {"planner": self.planner, "arena_bytes": self.arena_bytes,
                "lower_bound_bytes": self.lower_bound_bytes, "steps": self.steps,
                "plan_ms": self.plan_ms, "stored_order": self.stored_order,
                "step_labels": list(self.step_labels),
                "high_water": [list(p) for p in self.high_water],
                "tensors": [t.to_dict() for t in self.tensors]}

    @classmethod
    def from_dict(cls, d, where: str = "layout") -> ArenaLayout:
        f = read_fields(d, LAYOUT_FIELDS, where, optional=LAYOUT_OPTIONAL)
        return cls(**f | {"tensors": tuple(f["tensors"]), "high_water": tuple(f["high_water"]),
                          "step_labels": tuple(f["step_labels"])})


MAX_TENSORS = 100_000
LAYOUT_FIELDS = {
    "planner": _TEXT, "arena_bytes": _COUNT, "lower_bound_bytes": _COUNT,
    "steps": Setting("int", 0, MAX_TENSORS),
    "tensors": lambda v, w: read_list(v, ArenaTensor.from_dict, w, MAX_TENSORS),
    "high_water": lambda v, w: read_list(v, _step_water, w, MAX_TENSORS),
    "plan_ms": _MS, "step_labels": Setting("str-list", max_len=MAX_TENSORS),
    "stored_order": Setting("bool")}
LAYOUT_OPTIONAL = {"plan_ms": 0.0, "step_labels": [], "stored_order": True}


@dataclass(frozen=True)
class OpRow:
    """One operator: its output, MACs, cycles estimated for the board, measured times."""

    index: int
    op: str
    output_shape: tuple[int, ...]
    macs: int
    est_cycles: int
    est_us: float  # est_cycles / board clock
    host_us: float | None = None
    board_us: float | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"output_shape": list(self.output_shape)}

    @classmethod
    def from_dict(cls, d, where: str = "op") -> OpRow:
        f = read_fields(d, OP_FIELDS, where, optional={"host_us": None, "board_us": None})
        return cls(**f | {"output_shape": tuple(f["output_shape"]),
                          "est_us": f["est_us"] or 0.0})


OP_FIELDS = {"index": _COUNT, "op": _TEXT, "output_shape": _SHAPE, "macs": _COUNT,
             "est_cycles": _COUNT, "est_us": _MAYBE_MS, "host_us": _MAYBE_MS,
             "board_us": _MAYBE_MS}


@dataclass(frozen=True)
class RunRecord:
    """One inference on the host interpreter or on a board, on a seeded random input.

    `output` is the first graph output, flattened. On a board `where` names it and its
    port; `matches_host` says whether its output equals the host interpreter's; `op_cycles`
    are the cycles per op it reported (READ_TIMINGS; measured when `cycles_measured`).
    """

    where: str  # "host" or the board's name and port
    seed: int
    total_us: float
    op_us: tuple[float, ...]
    output: tuple = ()
    output_shape: tuple[int, ...] = ()
    output_dtype: str = ""
    repeats: int = 1
    arena_bytes: int = 0
    round_trip_ms: float | None = None
    cycles: int | None = None
    cycles_measured: bool = False
    matches_host: bool | None = None
    op_cycles: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"op_us": list(self.op_us), "output": list(self.output),
                                           "output_shape": list(self.output_shape),
                                           "op_cycles": list(self.op_cycles)}

    @classmethod
    def from_dict(cls, d, where: str = "run") -> RunRecord:
        f = read_fields(d, RUN_FIELDS, where, optional=RUN_OPTIONAL)
        return cls(**f | {k: tuple(f[k]) for k in ("op_us", "output", "output_shape",
                                                    "op_cycles")})


MAX_OUTPUT = 1_000_000
RUN_FIELDS = {
    "where": _TEXT, "seed": Setting("int"), "total_us": _MS,
    "op_us": Setting("float-list", 0, max_len=MAX_TENSORS),
    "output": Setting("float-list", max_len=MAX_OUTPUT), "output_shape": _SHAPE,
    "output_dtype": _TEXT, "repeats": Setting("int", 1), "arena_bytes": _COUNT,
    "round_trip_ms": _MAYBE_MS, "cycles": _MAYBE_COUNT, "cycles_measured": Setting("bool"),
    "matches_host": Setting("bool", none=True),
    "op_cycles": Setting("int-list", 0, max_len=MAX_TENSORS)}
RUN_OPTIONAL = {"output": [], "output_shape": [], "output_dtype": "", "repeats": 1,
                "arena_bytes": 0, "round_trip_ms": None, "cycles": None,
                "cycles_measured": False, "matches_host": None, "op_cycles": []}


_FIT_FIELDS = ("board", "arena_bytes", "runtime_overhead_bytes", "sram_bytes", "weights_bytes",
               "code_bytes", "flash_bytes")


@dataclass(frozen=True)
class McuState:
    """Everything the MCU lab shows for one model on one board."""

    model: str  # the model's name (file stem)
    model_path: str
    model_file_bytes: int
    n_operators: int
    board: BoardPreset
    layouts: tuple[ArenaLayout, ...]  # the chosen planner first, then the one compared
    fit: FitCheck  # of layouts[0]
    ops: tuple[OpRow, ...]
    host_run: RunRecord | None = None
    board_run: RunRecord | None = None
    note: str = ""  # e.g. why the host interpreter cannot run this model
    compare_note: str = ""  # why the compared planner has no layout (it does not apply)

    def to_dict(self) -> dict:
        return {"model": self.model, "model_path": self.model_path,
                "model_file_bytes": self.model_file_bytes, "n_operators": self.n_operators,
                "board": self.board.to_dict(), "layouts": [lay.to_dict() for lay in self.layouts],
                "fit": self.fit.to_dict(), "ops": [o.to_dict() for o in self.ops],
                "host_run": self.host_run.to_dict() if self.host_run else None,
                "board_run": self.board_run.to_dict() if self.board_run else None,
                "note": self.note, "compare_note": self.compare_note}

    @classmethod
    def from_dict(cls, d, where: str = "labs.mcu.state") -> McuState:
        f = read_fields(d, STATE_FIELDS, where, optional=STATE_OPTIONAL)
        board = BoardPreset.from_dict(f["board"], origin=f"{where}.board")
        if not f["layouts"]:
            raise ValueError(f"{where}.layouts: expected at least one layout")
        return cls(**f | {"board": board, "layouts": tuple(f["layouts"]),
                          "fit": FitCheck(**f["fit"]), "ops": tuple(f["ops"])})


def _run(v, where: str) -> RunRecord | None:
    return None if v is None else RunRecord.from_dict(v, where)


STATE_FIELDS = {
    "model": _TEXT, "model_path": _TEXT, "model_file_bytes": _COUNT, "n_operators": _COUNT,
    "board": lambda v, w: v,  # BoardPreset.from_dict checks it
    "layouts": lambda v, w: read_list(v, ArenaLayout.from_dict, w, 100),
    "fit": lambda v, w: read_fields(v, {"board": _TEXT} | dict.fromkeys(_FIT_FIELDS[1:],
                                                                          _COUNT), w),
    "ops": lambda v, w: read_list(v, OpRow.from_dict, w, MAX_TENSORS),
    "host_run": _run, "board_run": _run, "note": _TEXT, "compare_note": _TEXT}
STATE_OPTIONAL = {"model_path": "", "host_run": None, "board_run": None, "note": "",
                  "compare_note": ""}


def _kib(nbytes: int) -> str:
    return f"{nbytes / 1024:.1f} KiB" if nbytes >= 1024 else f"{nbytes} B"


@dataclass(frozen=True)
class McuSnapshot:
    """A snapshot's `labs.mcu`, read: the settings as checked, and the lab's state (None: the
    lab had loaded no model)."""

    settings: dict
    state: McuState | None
