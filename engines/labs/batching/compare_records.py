"""The records of the batching lab's Compare and Rate sweep tabs, and their snapshot state:
`PolicyRun` (one policy's whole run), `SweepPoint` (one rate and policy; the sweep's knee is
`engines.serve.metrics.knee`). Checked field by field, so the section reader (section.py) can
read them without the runs (compare.py) that make them; `read_batching_metrics` reads a run's
metrics dict (a PolicyRun's, and the section's own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inferlab.engines.fields import Setting, read_fields, read_list, read_object
from inferlab.engines.kv.block_manager import PREFIX_CACHES
from inferlab.engines.presets import dataclass_from_dict
from inferlab.engines.serve.metrics import METRIC_KEYS, read_serving_metrics
from inferlab.engines.serve.scheduler import POLICIES, SCHEDULES

MAX_VALUES = 100_000  # per-request latencies kept per run (the workload's own limit)


VARIANT_KEYS = ("policy", "prefix_cache", "schedule")
"""What the runs of a comparison may differ by (fields of PolicyRun and SweepPoint)."""


def _check_variant(record) -> None:
    """`record`'s policy, prefix cache and queue order are ones the scheduler knows."""
    for name, choices in zip(VARIANT_KEYS, (POLICIES, PREFIX_CACHES, SCHEDULES), strict=True):
        value = getattr(record, name)
        if value not in choices:
            raise ValueError(f"{name}: expected one of {', '.join(choices)}, got {value!r}")


class _Variant:
    @property
    def variant(self) -> dict:
        """The settings this run differs by: VARIANT_KEYS and their values."""
        return {k: getattr(self, k) for k in VARIANT_KEYS}


_SECONDS_LIST = Setting("float-list", 0, max_len=MAX_VALUES)
_RATE = Setting("float", 0)


def _seconds_list(name: str, values) -> tuple[float, ...]:
    return tuple(float(v) for v in _SECONDS_LIST.check(
        list(values) if isinstance(values, tuple) else values, name))


@dataclass(frozen=True)
class PolicyRun(_Variant):
    """One variant's whole run (a policy, with a prefix cache and a queue order): its
    metrics dict (batching_metrics) and per finished request its TTFT and TPOT in seconds
    (TPOT only for requests of two or more tokens)."""

    policy: str
    metrics: dict
    ttft_s: tuple[float, ...]
    tpot_s: tuple[float, ...]
    prefix_cache: str = "hash"  # a snapshot from before the choice ran vLLM's block hashes
    schedule: str = "fcfs"

    def __post_init__(self) -> None:
        _check_variant(self)
        if not isinstance(self.metrics, dict):
            raise ValueError("metrics: expected an object")
        object.__setattr__(self, "ttft_s", _seconds_list("ttft_s", self.ttft_s))
        object.__setattr__(self, "tpot_s", _seconds_list("tpot_s", self.tpot_s))

    def to_dict(self) -> dict:
        return {"policy": self.policy, "prefix_cache": self.prefix_cache,
                "schedule": self.schedule, "metrics": self.metrics,
                "ttft_s": list(self.ttft_s), "tpot_s": list(self.tpot_s)}


@dataclass(frozen=True)
class SweepPoint(_Variant):
    policy: str
    rate_per_s: float
    output_tokens_per_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    goodput_requests_per_s: float
    prefix_cache: str = "hash"
    schedule: str = "fcfs"

    def __post_init__(self) -> None:
        _check_variant(self)
        for name in ("rate_per_s", "output_tokens_per_s", "ttft_p50_s", "ttft_p99_s",
                     "tpot_p50_s", "tpot_p99_s", "goodput_requests_per_s"):
            object.__setattr__(self, name, float(_RATE.check(getattr(self, name), name)))

    def meets(self, slo_ttft_s: float, slo_tpot_s: float) -> bool:
        return self.ttft_p99_s <= slo_ttft_s and self.tpot_p99_s <= slo_tpot_s

    def to_dict(self) -> dict:
        return dict(self.__dict__)


BATCHING_COUNTS = {"iterations": Setting("int", 0), "preemptions": Setting("int", 0),
                   "prefix_hit_rate": Setting("float", 0, 1)}


def read_batching_metrics(m, where: str) -> dict:
    """`session.batching_metrics`' dict read back: the serving metrics (`read_serving_metrics`;
    none before a run), the iteration and preemption counts and the prefix hit rate (0 when
    absent)."""
    read_object(m, where)
    served = read_serving_metrics(m, where) if m.keys() & set(METRIC_KEYS) else {}
    return served | read_fields(m, BATCHING_COUNTS, where, optional=dict.fromkeys(
        BATCHING_COUNTS, 0))


def comparison_state(runs: Sequence[PolicyRun], points: Sequence[SweepPoint]) -> dict:
    """What a snapshot keeps of the Compare and Rate sweep tabs (empty parts left out)."""
    state = {}
    if runs:
        state["comparison"] = [r.to_dict() for r in runs]
    if points:
        state["sweep"] = [p.to_dict() for p in points]
    return state


def read_comparison_state(state: dict, where: str = "labs.batching.state"
                          ) -> tuple[list[PolicyRun], list[SweepPoint]]:
    """The inverse of comparison_state; ValueError naming the bad field."""
    def run(item, w):
        if isinstance(item, dict) and "metrics" in item:  # the metrics the Compare tab draws
            item = dict(item, metrics=read_batching_metrics(item["metrics"], f"{w}.metrics"))
        return dataclass_from_dict(PolicyRun, item, w, ValueError)

    def point(item, w):
        return dataclass_from_dict(SweepPoint, item, w, ValueError)

    read_object(state, where)
    runs = read_list(state.get("comparison", []), run, f"{where}.comparison", 100)
    points = read_list(state.get("sweep", []), point, f"{where}.sweep", MAX_VALUES)
    if runs and len(runs) != 2:
        raise ValueError(f"{where}.comparison: expected two runs (A and B), got {len(runs)}")
    return runs, points
