"""The serving engine's records: what every request is, and what each iteration did.

`RequestInfo` is fixed when a request is submitted; `IterationRecord` is what one scheduler
iteration put through the model (or the cost model, on the simulated clock) and when, on the
run's clock (`clock` says which: "wall" or "simulated"). Frozen: `ServingEngine` hands them
out, the batching and endpoint labs draw and store them (`to_dict` / `from_dict`, ValueError
naming the field). They live here, beside the engine that makes them, so that the engine
imports no lab.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from numbers import Integral, Real

from inferlab.engines.presets import dataclass_from_dict
from inferlab.engines.settings import INT_LIMIT, Setting

CLOCKS = ("wall", "simulated")


_COUNT = Setting("int", 0)
_SECONDS = Setting("float")


def _count(record, name: str) -> None:
    """An int >= 0 (numpy integers become int: the records stay JSON-able)."""
    value = getattr(record, name)
    if type(value) is int and 0 <= value < INT_LIMIT:  # the engine's own: nothing to convert
        return
    if isinstance(value, Integral) and not isinstance(value, bool):
        value = int(value)
    object.__setattr__(record, name, _COUNT.check(value, name))


def _seconds(record, name: str) -> None:
    """A finite real number (stored as float)."""
    value = getattr(record, name)
    if type(value) is float and math.isfinite(value):  # the engine's own
        return
    if isinstance(value, Real) and not isinstance(value, bool | int | float):
        value = float(value)  # a numpy number
    object.__setattr__(record, name, float(_SECONDS.check(value, name)))


def _text(record, name: str, empty: bool = True) -> None:
    value = getattr(record, name)
    if not isinstance(value, str) or (not empty and not value):
        raise ValueError(f"{name}: expected a {'' if empty else 'non-empty '}string")


def _ids(record, name: str) -> None:
    """A tuple of request ids (a list is taken as one)."""
    value = getattr(record, name)
    # set(map(type, ...)): one pass in C for plain str ids (a record per iteration, an id
    # per sequence); str subclasses take the isinstance check
    if not isinstance(value, (tuple, list)) or not (
            set(map(type, value)) <= {str} or all(isinstance(v, str) for v in value)):
        raise ValueError(f"{name}: expected a tuple of request ids")
    if type(value) is not tuple:
        object.__setattr__(record, name, tuple(value))


@dataclass(frozen=True)
class RequestInfo:
    request_id: str
    arrival_s: float
    prompt_tokens: int
    max_new_tokens: int
    prompt: str = ""  # the text, when the workload has one

    def __post_init__(self) -> None:
        _text(self, "request_id", empty=False)
        _seconds(self, "arrival_s")
        _count(self, "prompt_tokens")
        _count(self, "max_new_tokens")
        _text(self, "prompt")

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
        _text(self, "request_id", empty=False)
        _count(self, "start")
        _count(self, "n_tokens")
        _count(self, "cached")
        if self.cached > self.start:
            raise ValueError(f"cached: {self.cached} tokens, but the chunk starts at "
                             f"{self.start}")


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
        _count(self, "index")
        _text(self, "policy")
        if self.clock not in CLOCKS:
            raise ValueError(f"clock: expected one of {', '.join(CLOCKS)}, got {self.clock!r}")
        _seconds(self, "start_s")
        _seconds(self, "end_s")
        if self.end_s < self.start_s:
            raise ValueError(f"end_s {self.end_s} is before start_s {self.start_s}")
        prefills = self.prefills
        if not isinstance(prefills, (tuple, list)) or not all(
                isinstance(p, PrefillSlice) for p in prefills):
            raise ValueError("prefills: expected a tuple of PrefillSlice")
        object.__setattr__(self, "prefills", tuple(prefills))
        for name in ("decodes", "preempted", "finished"):
            _ids(self, name)
        for name in ("kv_used_blocks", "kv_total_blocks", "waiting", "running",
                     "evicted_blocks"):
            _count(self, name)
        for name in ("schedule_s", "forward_s", "sample_s"):
            _seconds(self, name)
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)}")

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
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected an object")
        raw = dict(data)
        prefills = raw.get("prefills")
        if not isinstance(prefills, list):
            raise ValueError(f"{where}.prefills: expected a list")
        raw["prefills"] = tuple(dataclass_from_dict(PrefillSlice, p, f"{where}.prefills[{i}]",
                                                    ValueError) for i, p in enumerate(prefills))
        for key in ("decodes", "preempted", "finished"):
            value = raw.get(key)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}.{key}: expected a list of request ids")
            raw[key] = tuple(value)
        return dataclass_from_dict(cls, raw, where, ValueError)
