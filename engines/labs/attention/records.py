"""The attention lab's records and their JSON form.

`AttentionRunInfo` is what a run is (shape, tiles, the closed forms of all three executions);
each step is an `engines.attention.step.AttentionStep`; `AttentionSnapshot` is a snapshot
section as read (section.py). `to_dict` / `from_dict` turn them into
plain JSON values and back; readers raise ValueError naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from inferlab.engines.attention.executions import closed_form
from inferlab.engines.attention.step import EXECUTIONS, AttentionStep
from inferlab.engines.attention.traffic import Traffic
from inferlab.engines.fields import (
    Setting,
    read_dataclass,
    read_fields,
    read_list,
    read_map,
    read_object,
    read_tuple,
)

COUNT = Setting("int", 0, 2**62)
NUMBER = Setting("float")
MAX_TILE_VALUES = 1 << 20
_TRAFFIC = partial(read_dataclass, Traffic,
                   fields={"bytes_read": COUNT, "bytes_written": COUNT, "flops": COUNT})


@dataclass(frozen=True)
class AttentionRunInfo:
    n: int
    d: int
    heads: int
    causal: bool
    br: int
    bc: int
    element_bytes: int
    execution: str  # the one being stepped
    on_chip_bytes: int  # the on-chip memory M (0: none given)
    closed_forms: dict  # execution -> Traffic
    source: str = ""  # what Q, K and V are (seeded, or a model's layer on a text)

    @classmethod
    def of(cls, n, d, heads, causal, br, bc, element_bytes, execution, on_chip_bytes=0,
           source=""):
        forms = {e: closed_form(e, n, d, br, bc, causal, element_bytes, heads)
                 for e in EXECUTIONS}
        return cls(n, d, heads, causal, br, bc, element_bytes, execution, on_chip_bytes, forms,
                   source)

    def to_dict(self) -> dict:
        return {"n": self.n, "d": self.d, "heads": self.heads, "causal": self.causal,
                "br": self.br, "bc": self.bc, "element_bytes": self.element_bytes,
                "execution": self.execution, "on_chip_bytes": self.on_chip_bytes,
                "closed_forms": {e: {"bytes_read": t.bytes_read,
                                     "bytes_written": t.bytes_written, "flops": t.flops}
                                 for e, t in self.closed_forms.items()},
                "source": self.source}

    @classmethod
    def from_dict(cls, value, where: str) -> AttentionRunInfo:
        size = Setting("int", 1, 1 << 20)
        fields = read_fields(value, {"n": size, "d": size, "heads": size,
                                     "causal": Setting("bool"), "br": size, "bc": size,
                                     "element_bytes": Setting("int", 1, 16),
                                     "execution": Setting("str", choices=EXECUTIONS),
                                     "on_chip_bytes": COUNT,
                                     "closed_forms": lambda v, w: read_map(
                                         v, _TRAFFIC, w, len(EXECUTIONS)),
                                     "source": Setting("str", max_len=400)}, where,
                             optional={"source": ""})
        stored = fields.pop("closed_forms")
        info = cls.of(**fields)  # derived data: recomputed, and the file's held to it
        if stored != info.closed_forms:
            raise ValueError(f"{where}.closed_forms: expected the closed forms of N = "
                             f"{info.n}, d = {info.d}, Br = {info.br}, Bc = {info.bc}, "
                             f"{info.heads} head(s), got others")
        return info


@dataclass(frozen=True)
class AttentionSnapshot:
    """An attention lab snapshot section as read (`read_attention_section`): what the window
    replays, a comparison plots and a report's formulas substitute."""

    settings: dict
    """The lab's settings, checked (engines/labs/attention/settings.py)."""
    run: AttentionRunInfo | None
    """None: the lab had not run when the snapshot was taken (no steps)."""
    steps: tuple[AttentionStep, ...]
    """The stepped execution's steps; only the last few keep their score tile, m and ℓ."""
    timings: tuple[dict, ...]
    """Rows of `bench.timings` the lab measured (N, seconds per call per kernel); none: not
    measured."""
    roofs: tuple[tuple, ...]
    """(label, peak FLOP/s, bandwidth bytes/s, measured) the run was placed on."""


def _floats(x: np.ndarray | None):
    """A float array as a JSON list: NaN (a split-K chunk not yet run) and ±inf (a masked
    score) as null, "inf", "-inf"."""
    if x is None:
        return None
    def one(v):
        v = float(v)
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else v
    return [one(v) for v in x.ravel()] if x.ndim == 1 else [[one(v) for v in r] for r in x]


def _read_floats(value, where: str, ndim: int):
    """`_floats`'s list read back (null: None), each value a finite number, null (NaN),
    "inf" or "-inf"."""
    if value is None:
        return None
    def one(v, at):
        if v is None:
            return math.nan
        if v in ("inf", "-inf"):
            return float(v)
        return NUMBER(v, at)
    if ndim == 1:
        return np.array(read_list(value, one, where, MAX_TILE_VALUES), dtype=np.float32)
    rows = read_list(value, lambda r, at: read_list(r, one, at, MAX_TILE_VALUES), where,
                     MAX_TILE_VALUES)
    if len({len(r) for r in rows}) > 1:
        raise ValueError(f"{where}: expected rows of one length")
    return np.array(rows, dtype=np.float32).reshape(len(rows), -1 if rows else 0)


def step_to_dict(s: AttentionStep, with_arrays: bool = True) -> dict:
    out = {"execution": s.execution, "step": s.step, "steps_total": s.steps_total,
           "head": s.head, "phase": s.phase,
           "q_rows": list(s.q_rows), "k_rows": list(s.k_rows),
           "step_bytes_read": s.step_bytes_read, "step_bytes_written": s.step_bytes_written,
           "on_chip_bytes": s.on_chip_bytes, "bytes_read": s.bytes_read,
           "bytes_written": s.bytes_written, "flops": s.flops}
    if with_arrays:
        out |= {"score_tile": _floats(s.score_tile), "m_rows": _floats(s.m_rows),
                "l_rows": _floats(s.l_rows)}
    return out


PHASES = ("scores", "softmax", "output", "tile", "chunk", "combine")


def _rows(value, where):
    a, b = read_tuple(value, (COUNT, COUNT), where, "[start, end]")
    if b < a:
        raise ValueError(f"{where}: expected start <= end, got [{a}, {b}]")
    return a, b


def step_from_dict(value, where: str) -> AttentionStep:
    read_object(value, where)
    f = read_fields({k: v for k, v in value.items()
                     if k not in ("score_tile", "m_rows", "l_rows")},
                    {"execution": Setting("str", choices=EXECUTIONS), "step": COUNT,
                     "steps_total": Setting("int", 1, 2**62), "head": COUNT,
                     "phase": Setting("str", choices=PHASES), "q_rows": _rows,
                     "k_rows": _rows, "step_bytes_read": COUNT, "step_bytes_written": COUNT,
                     "on_chip_bytes": COUNT, "bytes_read": COUNT, "bytes_written": COUNT,
                     "flops": COUNT}, where)
    if f["step"] >= f["steps_total"]:
        raise ValueError(f"{where}.step: expected below steps_total {f['steps_total']}, "
                         f"got {f['step']}")
    return AttentionStep(**f, score_tile=_read_floats(value.get("score_tile"),
                                                       f"{where}.score_tile", 2),
                         m_rows=_read_floats(value.get("m_rows"), f"{where}.m_rows", 1),
                         l_rows=_read_floats(value.get("l_rows"), f"{where}.l_rows", 1))
