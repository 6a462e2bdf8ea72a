"""The serving engine's records: what every request is, and what each iteration did.

`RequestInfo` is fixed when a request is submitted; `IterationRecord` is what one scheduler
iteration put through the model (or the cost model, on the simulated clock) and when, on the
run's clock (`clock` says which: "wall" or "simulated"). Frozen: `ServingEngine` hands them
out, the batching and endpoint labs draw and store them (`to_dict` / `from_dict`, ValueError
naming the field). They live here, beside the engine that makes them, so that the engine
imports no lab.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from inferlab.engines.fields import (
    Setting,
    check_fields,
    read_count,
    read_float,
    read_list,
    read_name,
    read_names,
    read_object,
    read_seconds,
)
from inferlab.engines.presets import dataclass_from_dict

CLOCKS = ("wall", "simulated")

_TEXT = Setting("str")

_REQUEST_FIELDS = {"request_id": read_name, "arrival_s": read_float,
                   "prompt_tokens": read_count, "max_new_tokens": read_count, "prompt": _TEXT}


@dataclass(frozen=True)
class RequestInfo:
    request_id: str
    arrival_s: float
    prompt_tokens: int
    max_new_tokens: int
    prompt: str = ""  # the text, when the workload has one

    def __post_init__(self) -> None:
        check_fields(self, _REQUEST_FIELDS)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "request") -> RequestInfo:
        return dataclass_from_dict(cls, data, where, ValueError)


@dataclass(frozen=True)
class PrefillSlice:
    """A prefill chunk of one request: tokens [start, start + n) of its (re)prefill; `cached`:
    how many of the tokens before `start` a prefix hit supplied (the first chunk of a
    (re)prefill; 0 otherwise)."""

    request_id: str
    start: int
    n_tokens: int
    cached: int = 0

    def __post_init__(self) -> None:
        check_fields(self, _SLICE_FIELDS)
        if self.cached > self.start:
            raise ValueError(f"cached: {self.cached} tokens, but the chunk starts at "
                             f"{self.start}")

    @classmethod
    def from_engine(cls, request_id: str, start: int, n_tokens: int, cached: int
                    ) -> PrefillSlice:
        """A slice the engine made from its own scheduler's chunk: every field is already
        what the checks ask (names, counts), so none is checked again."""
        return _unchecked(cls, {"request_id": request_id, "start": start,
                                "n_tokens": n_tokens, "cached": cached})

    @classmethod
    def from_dict(cls, data: dict, where: str = "prefill") -> PrefillSlice:
        return dataclass_from_dict(cls, data, where, ValueError)


_SLICE_FIELDS = {"request_id": read_name, "start": read_count, "n_tokens": read_count,
                 "cached": read_count}


@dataclass(frozen=True)
class IterationRecord:
    """One iteration: its batch, its time span on the run's clock, the pool afterwards."""

    index: int
    policy: str
    clock: str  # "wall" | "simulated"
    start_s: float
    end_s: float
    prefills: tuple[PrefillSlice, ...]
    decodes: tuple[str, ...]  # request ids that fed one token back
    preempted: tuple[str, ...]  # request ids preempted (recompute) at this iteration
    finished: tuple[str, ...]  # request ids whose last token came out of it
    kv_used_blocks: int
    kv_total_blocks: int
    waiting: int  # requests queued after it (arrived, not running)
    running: int
    # Where the iteration's time went, on the run's clock: schedule_s is the host work before
    # the forward (the previous update and this schedule; 0 on the simulated clock, which
    # times the batch alone), then the forward and the sampling.
    schedule_s: float = 0.0
    forward_s: float = 0.0
    sample_s: float = 0.0
    evicted_blocks: int = 0  # cached prefix blocks eviction gave up during the iteration

    def __post_init__(self) -> None:
        check_fields(self, _ITERATION_FIELDS)
        if self.end_s < self.start_s:
            raise ValueError(f"end_s {self.end_s} is before start_s {self.start_s}")
        prefills = self.prefills
        if not isinstance(prefills, (tuple, list)) or not all(
                isinstance(p, PrefillSlice) for p in prefills):
            raise ValueError("prefills: expected a tuple of PrefillSlice")
        object.__setattr__(self, "prefills", tuple(prefills))

    @classmethod
    def from_engine(cls, **values) -> IterationRecord:
        """A record the serving engine made from its own state (every field given): the
        checks are for records read back from a file, and the engine makes tens of
        thousands a second on the simulated clock, so none is checked again."""
        return _unchecked(cls, values)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def prefill_tokens(self) -> int:
        return sum(p.n_tokens for p in self.prefills)

    @property
    def decode_tokens(self) -> int:
        return len(self.decodes)

    @property
    def batch_size(self) -> int:
        """Sequences in the forward: decodes plus prefill chunks."""
        return len(self.decodes) + len(self.prefills)

    @property
    def kv_usage(self) -> float:
        return self.kv_used_blocks / self.kv_total_blocks if self.kv_total_blocks else 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "iteration") -> IterationRecord:
        raw = dict(read_object(data, where))
        if "prefills" in raw:
            raw["prefills"] = read_list(raw["prefills"], PrefillSlice.from_dict,
                                        f"{where}.prefills")
        return dataclass_from_dict(cls, raw, where, ValueError)


_ITERATION_FIELDS = {
    "index": read_count, "policy": _TEXT, "clock": Setting("str", choices=CLOCKS),
    "start_s": read_float, "end_s": read_float, "decodes": read_names,
    "preempted": read_names, "finished": read_names, "kv_used_blocks": read_count,
    "kv_total_blocks": read_count, "waiting": read_count, "running": read_count,
    "evicted_blocks": read_count, "schedule_s": read_seconds, "forward_s": read_seconds,
    "sample_s": read_seconds}


def _unchecked(cls, values: dict):
    """An instance of the frozen dataclass `cls` holding `values` (every field), made without
    __init__'s checks (its __post_init__)."""
    if len(values) != len(_field_names(cls)):
        missing = sorted(set(_field_names(cls)) - set(values))
        raise TypeError(f"{cls.__name__}: every field must be given; missing {missing}")
    record = object.__new__(cls)
    record.__dict__.update(values)
    return record


def _field_names(cls) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
