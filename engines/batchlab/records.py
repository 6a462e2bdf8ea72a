"""The batching lab's records: what every request is, and what each iteration did.

`RequestInfo` is fixed when a request is submitted; `IterationRecord` is what one scheduler
iteration put through the model (or the cost model, on the simulated clock) and when, on the
run's clock (`clock` says which: "wall" or "simulated"). Frozen: engines hand them out, views
draw them, snapshots store them (`to_dict` / `from_dict`, ValueError naming the field).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from inferlab.engines.presets import dataclass_from_dict


@dataclass(frozen=True)
class RequestInfo:
    request_id: str
    arrival_s: float
    prompt_tokens: int
    max_new_tokens: int
    prompt: str = ""  # the text, when the workload has one

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "request") -> RequestInfo:
        return dataclass_from_dict(cls, data, where, ValueError)


@dataclass(frozen=True)
class PrefillSlice:
    """A prefill chunk of one request: tokens [start, start + n) of its (re)prefill."""

    request_id: str
    start: int
    n_tokens: int


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
