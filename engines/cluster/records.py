"""What a cluster run hands out: one record per request (where it ran, its KV transfer, its
token times: the batching lab's record plus the instance), per KV transfer (a span on the
link's lane), per instance (its role, its pool, the ServingEngine's iteration records) and,
for expert-parallel layouts, per MoE layer (its all-to-alls, its load imbalance).
Frozen, with to_dict / from_dict (ValueError naming the field), for the snapshot."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from inferlab.engines.cluster.layout import COLOCATED, DECODE, PREFILL
from inferlab.engines.fields import (
    Setting,
    check_fields,
    or_none,
    read_count,
    read_floats,
    read_list,
    read_name,
    read_object,
    read_seconds,
)
from inferlab.engines.presets import dataclass_from_dict
from inferlab.engines.serve.records import IterationRecord, RequestInfo

ROLES = (COLOCATED, PREFILL, DECODE)


@dataclass(frozen=True)
class ClusterRequest:
    """One request through the cluster. `instance` ran it (its prefill, in a pd layout);
    `decode_instance` its decode (None: colocated, or nothing left to decode);
    `kv_transfer_s` = link_transfer_s(kv_bytes_per_request(prompt_tokens), link) (that is
    kv_bytes_per_token × prompt_tokens without windowed layers) when its KV moved, else 0; `token_times_s` every output token's time on the simulated clock."""

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
        check_fields(self, _REQUEST_FIELDS)

    def to_dict(self) -> dict:
        return asdict(self) | {"token_times_s": list(self.token_times_s)}

    @classmethod
    def from_dict(cls, data, where: str = "request") -> ClusterRequest:
        return dataclass_from_dict(cls, data, where, ValueError)


_REQUEST_FIELDS = {"request_id": read_name, "arrival_s": read_seconds,
                   "prompt_tokens": read_count, "max_new_tokens": read_count,
                   "instance": read_count, "decode_instance": or_none(read_count),
                   "kv_transfer_s": read_seconds, "cached_tokens": read_count,
                   "token_times_s": read_floats}  # every token's time: checked in C


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
        check_fields(self, _TRANSFER_FIELDS)
        if self.end_s < self.start_s:
            raise ValueError(f"end_s {self.end_s} is before start_s {self.start_s}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data, where: str = "transfer") -> KVTransfer:
        return dataclass_from_dict(cls, data, where, ValueError)


_TRANSFER_FIELDS = {"request_id": read_name, "src": read_count, "dst": read_count,
                    "start_s": read_seconds, "end_s": read_seconds, "n_bytes": read_count}


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
        check_fields(self, _INSTANCE_FIELDS)

    def to_dict(self) -> dict:
        return {"index": self.index, "role": self.role, "tp": self.tp,
                "kv_total_blocks": self.kv_total_blocks, "busy_s": self.busy_s,
                "comm_s": self.comm_s, "requests": [r.to_dict() for r in self.requests],
                "iterations": [r.to_dict() for r in self.iterations]}

    @classmethod
    def from_dict(cls, data, where: str = "instance") -> InstanceRun:
        fields = dict(read_object(data, where))
        for key, record in (("requests", RequestInfo), ("iterations", IterationRecord)):
            if key in fields:
                fields[key] = tuple(read_list(fields[key], record.from_dict, f"{where}.{key}"))
        return dataclass_from_dict(cls, fields, where, ValueError)


_INSTANCE_FIELDS = {"index": read_count, "role": Setting("str", choices=ROLES),
                    "tp": read_count, "kv_total_blocks": read_count, "busy_s": read_seconds,
                    "comm_s": read_seconds}


@dataclass(frozen=True)
class MoELayerComm:
    """One MoE layer over a run: its all-to-alls' seconds and bytes (the hottest GPU's, summed
    over the steps) and the GPUs' load imbalance before and after EPLB."""

    layer: int
    dispatch_s: float
    combine_s: float
    dispatch_bytes: float
    combine_bytes: float
    imbalance: float
    imbalance_eplb: float

    def __post_init__(self) -> None:
        check_fields(self, _MOE_LAYER_FIELDS)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data, where: str = "moe layer") -> MoELayerComm:
        return dataclass_from_dict(cls, data, where, ValueError)


_MOE_LAYER_FIELDS = {"layer": read_count, "dispatch_s": read_seconds,
                     "combine_s": read_seconds, "dispatch_bytes": Setting("float", 0),
                     "combine_bytes": Setting("float", 0), "imbalance": Setting("float", 1),
                     "imbalance_eplb": Setting("float", 1)}
