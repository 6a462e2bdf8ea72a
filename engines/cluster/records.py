"""What a cluster run hands out: one record per request (where it ran, its KV transfer, its
token times: the batching lab's record plus the instance), per KV transfer (a span on the
link's lane) and per instance (its role, its pool, the ServingEngine's iteration records).
Frozen, with to_dict / from_dict (ValueError naming the field), for the snapshot."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from inferlab.engines.cluster.layout import COLOCATED, DECODE, PREFILL
from inferlab.engines.presets import dataclass_from_dict
from inferlab.engines.serve.records import IterationRecord, RequestInfo
from inferlab.engines.settings import Setting

ROLES = (COLOCATED, PREFILL, DECODE)


_SECONDS = Setting("float", 0)
_INDEX = Setting("int", 0)


def _nonneg(record, name: str) -> None:
    v = _SECONDS.check(getattr(record, name), name)  # big integers, bools, nan: refused
    object.__setattr__(record, name, float(v))


def _index(record, name: str, none: bool = False) -> None:
    v = getattr(record, name)
    if not (none and v is None):
        _INDEX.check(v, name)


def _text(record, name: str) -> None:
    v = getattr(record, name)
    if not isinstance(v, str) or not v:
        raise ValueError(f"{name}: expected a non-empty string, got {type(v).__name__}")


@dataclass(frozen=True)
class ClusterRequest:
    """One request through the cluster. `instance` ran it (its prefill, in a pd layout);
    `decode_instance` its decode (None: colocated, or nothing left to decode);
    `kv_transfer_s` = kv_transfer_s(kv_bytes_per_token, prompt_tokens, link) when its KV
    moved, else 0; `token_times_s` every output token's time on the simulated clock."""

    request_id: str
    arrival_s: float
    prompt_tokens: int
    max_new_tokens: int
    instance: int
    decode_instance: int | None
    kv_transfer_s: float
    cached_tokens: int
    token_times_s: tuple[float, ...]

    def __post_init__(self) -> None:
        _text(self, "request_id")
        _nonneg(self, "arrival_s")
        _nonneg(self, "kv_transfer_s")
        for name in ("prompt_tokens", "max_new_tokens", "instance", "cached_tokens"):
            _index(self, name)
        _index(self, "decode_instance", none=True)
        times = self.token_times_s
        if not isinstance(times, list | tuple) or not set(map(type, times)) <= {int, float}:
            raise ValueError("token_times_s: expected a list of finite seconds")
        try:  # one pass in C: a run hands out every token's time
            times = tuple(map(float, times))
        except (TypeError, ValueError):
            raise ValueError("token_times_s: expected a list of finite seconds") from None
        if not math.isfinite(sum(times)):
            raise ValueError("token_times_s: expected a list of finite seconds")
        object.__setattr__(self, "token_times_s", times)

    def to_dict(self) -> dict:
        return asdict(self) | {"token_times_s": list(self.token_times_s)}

    @classmethod
    def from_dict(cls, data, where: str = "request") -> ClusterRequest:
        return dataclass_from_dict(cls, data, where, ValueError)


@dataclass(frozen=True)
class KVTransfer:
    """A request's KV on the link, from prefill instance `src` to decode instance `dst`,
    landing at end_s (what the decode instance waits for)."""

    request_id: str
    src: int
    dst: int
    start_s: float
    end_s: float
    n_bytes: int

    def __post_init__(self) -> None:
        _text(self, "request_id")
        for name in ("src", "dst", "n_bytes"):
            _index(self, name)
        _nonneg(self, "start_s")
        _nonneg(self, "end_s")
        if self.end_s < self.start_s:
            raise ValueError(f"end_s {self.end_s} is before start_s {self.start_s}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data, where: str = "transfer") -> KVTransfer:
        return dataclass_from_dict(cls, data, where, ValueError)


@dataclass(frozen=True)
class InstanceRun:
    """One instance: its role, tensor degree, KV pool, and the ServingEngine's records (the
    requests as it saw them: a decode instance's prompt is the prompt + the first token)."""

    index: int
    role: str
    tp: int
    kv_total_blocks: int
    busy_s: float  # Σ iteration durations
    comm_s: float  # of which all-reduces
    requests: tuple[RequestInfo, ...]
    iterations: tuple[IterationRecord, ...]

    def utilization(self, makespan_s: float) -> float:
        """busy_s / the run's makespan (0 for an empty run)."""
        return self.busy_s / makespan_s if makespan_s > 0 else 0.0

    def __post_init__(self) -> None:
        for name in ("index", "tp", "kv_total_blocks"):
            _index(self, name)
        if self.role not in ROLES:
            raise ValueError(f"role: expected one of {', '.join(ROLES)}, got {self.role!r}")
        _nonneg(self, "busy_s")
        _nonneg(self, "comm_s")

    def to_dict(self) -> dict:
        return {"index": self.index, "role": self.role, "tp": self.tp,
                "kv_total_blocks": self.kv_total_blocks, "busy_s": self.busy_s,
                "comm_s": self.comm_s, "requests": [r.to_dict() for r in self.requests],
                "iterations": [r.to_dict() for r in self.iterations]}

    @classmethod
    def from_dict(cls, data, where: str = "instance") -> InstanceRun:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected an object")
        for key in ("requests", "iterations"):
            if not isinstance(data.get(key), list):
                raise ValueError(f"{where}.{key}: expected a list")
        fields = {k: v for k, v in data.items() if k not in ("requests", "iterations")}
        fields["requests"] = tuple(RequestInfo.from_dict(r, f"{where}.requests[{i}]")
                                   for i, r in enumerate(data["requests"]))
        fields["iterations"] = tuple(IterationRecord.from_dict(r, f"{where}.iterations[{i}]")
                                     for i, r in enumerate(data["iterations"]))
        return dataclass_from_dict(cls, fields, where, ValueError)
