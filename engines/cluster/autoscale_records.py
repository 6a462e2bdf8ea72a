"""What an autoscaled run hands out besides the cluster's records: each replica's life (when
it was asked for, when its cold start ended, when it began to drain, when it was given
back) and each autoscaler tick (the concurrency it saw, the count it asked for, the fleet it
had). Frozen, with to_dict / from_dict (ValueError naming the field), for the snapshot.

    GPU-hours = Σ over replicas (removed_s, or the run's end) − started_s, × GPUs per
                replica, / 3600    — a replica costs from the moment it is asked for (its
                cold start holds the GPUs) to the moment it is given back
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from inferlab.engines.fields import (
    Setting,
    check_fields,
    or_none,
    read_count,
    read_fields,
    read_list,
    read_object,
    read_seconds,
)
from inferlab.engines.presets import dataclass_from_dict

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class ReplicaLife:
    """One replica of an autoscaled fleet: `index` its instance; asked for at started_s,
    serving from ready_s (None: removed before its cold start ended), draining from drain_s
    (None: never), given back at removed_s (None: still there at the run's end)."""

    index: int
    started_s: float
    ready_s: float | None
    drain_s: float | None
    removed_s: float | None

    def __post_init__(self) -> None:
        check_fields(self, _LIFE_FIELDS)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data, where: str = "replica") -> ReplicaLife:
        return dataclass_from_dict(cls, data, where, ValueError)

    def held_s(self, end_s: float) -> float:
        """Seconds it held its GPUs, the run ending at end_s."""
        until = end_s if self.removed_s is None else self.removed_s
        return max(0.0, until - self.started_s)


_LIFE_FIELDS = {"index": read_count, "started_s": read_seconds,
                "ready_s": or_none(read_seconds), "drain_s": or_none(read_seconds),
                "removed_s": or_none(read_seconds)}


@dataclass(frozen=True)
class ScaleTick:
    """One autoscaler decision at t_s: requests in flight then, their stable- and
    panic-window means, the replica count it asked for, and the fleet after it acted —
    serving, still cold-starting, draining — and whether it was in panic mode."""

    t_s: float
    in_flight: int
    stable_concurrency: float
    panic_concurrency: float
    desired: int
    ready: int
    booting: int
    draining: int
    panicking: bool

    def __post_init__(self) -> None:
        check_fields(self, _TICK_FIELDS)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data, where: str = "tick") -> ScaleTick:
        return dataclass_from_dict(cls, data, where, ValueError)


_TICK_FIELDS = {"t_s": read_seconds, "in_flight": read_count,
                "stable_concurrency": read_seconds, "panic_concurrency": read_seconds,
                "desired": read_count, "ready": read_count, "booting": read_count,
                "draining": read_count, "panicking": Setting("bool")}


@dataclass(frozen=True)
class AutoscaleRun:
    """An autoscaled run's fleet: the policy (AutoscalePolicy.to_dict), each new replica's
    cold start, GPUs per replica, the replicas' lives, the ticks, and the run's span
    [start_s, end_s] (first arrival to last token)."""

    policy: dict
    cold_start_s: float
    gpus_per_replica: int
    start_s: float
    end_s: float
    replicas: tuple[ReplicaLife, ...]
    ticks: tuple[ScaleTick, ...]

    @property
    def gpu_hours(self) -> float:
        """Module doc."""
        return (sum(r.held_s(self.end_s) for r in self.replicas) * self.gpus_per_replica
                / SECONDS_PER_HOUR)

    @property
    def peak_replicas(self) -> int:
        """The most replicas held at once (serving, starting or draining)."""
        return max((t.ready + t.booting + t.draining for t in self.ticks),
                   default=len(self.replicas))

    def replicas_over_time(self) -> list[list]:
        """[t_s, serving, held (serving + starting + draining), in flight] at each tick."""
        return [[t.t_s, t.ready, t.ready + t.booting + t.draining, t.in_flight]
                for t in self.ticks]

    def to_dict(self) -> dict:
        return {"policy": dict(self.policy), "cold_start_s": self.cold_start_s,
                "gpus_per_replica": self.gpus_per_replica, "start_s": self.start_s,
                "end_s": self.end_s, "replicas": [r.to_dict() for r in self.replicas],
                "ticks": [t.to_dict() for t in self.ticks]}

    @classmethod
    def from_dict(cls, data, where: str = "autoscale") -> AutoscaleRun:
        d = read_fields(data, {
            "policy": read_object, "cold_start_s": read_seconds,
            "gpus_per_replica": Setting("int", 1), "start_s": read_seconds,
            "end_s": read_seconds,
            "replicas": lambda v, w: read_list(v, ReplicaLife.from_dict, w, max_len=4096),
            "ticks": lambda v, w: read_list(v, ScaleTick.from_dict, w, max_len=1_000_000)},
            where)
        return cls(dict(d["policy"]), d["cold_start_s"], d["gpus_per_replica"], d["start_s"],
                   d["end_s"], tuple(d["replicas"]), tuple(d["ticks"]))
