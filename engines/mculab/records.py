"""The records the MCU lab's views draw: an arena layout per plan, per-op rows, runs.

Plain frozen dataclasses, no Qt: the lab builds them from engine objects (`engines/mculab/section.py`),
the CLI writes them into snapshots, and a snapshot reads back into the same records, so a
replay needs neither the `.tflite` file nor a board. `to_dict` / `from_dict` are the
snapshot form; `from_dict` raises ValueError naming the field that is wrong.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from inferlab.engines.board.boards import BoardPreset, FitCheck

GRAPH_INPUT = "graph input"
SCRATCH = "scratch"


def _need(d, key: str, where: str):
    if not isinstance(d, dict) or key not in d:
        raise ValueError(f"{where}: missing field {key!r}")
    return d[key]


def _int(d, key: str, where: str) -> int:
    value = _need(d, key, where)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{where}.{key}: expected an integer, got {value!r}")
    return value


def _opt_float(value, where: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(f"{where}: expected a number or null, got {value!r}")
    return float(value)


def _list(d, key: str, where: str) -> list:
    value = _need(d, key, where)
    if not isinstance(value, list):
        raise ValueError(f"{where}.{key}: expected a list")
    return value


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
        shape = d.get("shape", []) if isinstance(d, dict) else []
        if not isinstance(shape, list) or not all(isinstance(v, int) for v in shape):
            raise ValueError(f"{where}.shape: expected a list of integers")
        tensor, producer = d.get("tensor"), d.get("producer")
        for key, value in (("tensor", tensor), ("producer", producer)):
            if value is not None and not isinstance(value, int):
                raise ValueError(f"{where}.{key}: expected an integer or null")
        return cls(name=str(_need(d, "name", where)), size=_int(d, "size", where),
                   offset=_int(d, "offset", where), first=_int(d, "first", where),
                   last=_int(d, "last", where), tensor=tensor, shape=tuple(shape),
                   dtype=str(d.get("dtype", "")), producer=producer,
                   kind=str(d.get("kind", GRAPH_INPUT)), alias_of=str(d.get("alias_of", "")))


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
        tensors = tuple(ArenaTensor.from_dict(t, f"{where}.tensors[{i}]")
                        for i, t in enumerate(_list(d, "tensors", where)))
        water = []
        for i, pair in enumerate(_list(d, "high_water", where)):
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) for v in pair)):
                raise ValueError(f"{where}.high_water[{i}]: expected [step, bytes]")
            water.append((pair[0], pair[1]))
        labels = d.get("step_labels", [])
        if not isinstance(labels, list):
            raise ValueError(f"{where}.step_labels: expected a list")
        return cls(planner=str(_need(d, "planner", where)), arena_bytes=_int(d, "arena_bytes", where),
                   lower_bound_bytes=_int(d, "lower_bound_bytes", where), steps=_int(d, "steps", where),
                   tensors=tensors, high_water=tuple(water),
                   plan_ms=_opt_float(d.get("plan_ms", 0.0), f"{where}.plan_ms") or 0.0,
                   step_labels=tuple(str(v) for v in labels),
                   stored_order=bool(d.get("stored_order", True)))


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
        shape = _need(d, "output_shape", where)
        if not isinstance(shape, list):
            raise ValueError(f"{where}.output_shape: expected a list")
        return cls(index=_int(d, "index", where), op=str(_need(d, "op", where)),
                   output_shape=tuple(int(v) for v in shape), macs=_int(d, "macs", where),
                   est_cycles=_int(d, "est_cycles", where),
                   est_us=_opt_float(_need(d, "est_us", where), f"{where}.est_us") or 0.0,
                   host_us=_opt_float(d.get("host_us"), f"{where}.host_us"),
                   board_us=_opt_float(d.get("board_us"), f"{where}.board_us"))


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
        if not isinstance(d, dict):
            raise ValueError(f"{where}: expected an object")
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        for key in ("op_us", "output", "output_shape", "op_cycles"):
            if not isinstance(values.get(key, []), list):
                raise ValueError(f"{where}.{key}: expected a list")
            values[key] = tuple(values.get(key, []))
        for key in ("where", "seed", "total_us"):
            _need(d, key, where)
        try:
            return cls(**values)
        except TypeError as exc:
            raise ValueError(f"{where}: {exc}") from None


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
        board = BoardPreset.from_dict(_need(d, "board", where), origin=f"{where}.board")
        layouts = tuple(ArenaLayout.from_dict(lay, f"{where}.layouts[{i}]")
                        for i, lay in enumerate(_list(d, "layouts", where)))
        if not layouts:
            raise ValueError(f"{where}.layouts: expected at least one layout")
        fit_raw = _need(d, "fit", where)
        fit = FitCheck(**{k: _need(fit_raw, k, f"{where}.fit") for k in _FIT_FIELDS})
        ops = tuple(OpRow.from_dict(o, f"{where}.ops[{i}]") for i, o in enumerate(_list(d, "ops", where)))
        runs = [RunRecord.from_dict(d[k], f"{where}.{k}") if d.get(k) is not None else None
                for k in ("host_run", "board_run")]
        return cls(model=str(_need(d, "model", where)), model_path=str(d.get("model_path", "")),
                   model_file_bytes=_int(d, "model_file_bytes", where),
                   n_operators=_int(d, "n_operators", where), board=board, layouts=layouts,
                   fit=fit, ops=ops, host_run=runs[0], board_run=runs[1],
                   note=str(d.get("note", "")), compare_note=str(d.get("compare_note", "")))


def _kib(nbytes: int) -> str:
    return f"{nbytes / 1024:.1f} KiB" if nbytes >= 1024 else f"{nbytes} B"
