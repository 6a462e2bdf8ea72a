"""Concurrency-based autoscaling of a fleet of replicas, shaped as Knative's Pod Autoscaler
(KPA), the one KServe uses: every `tick_s` it reads the requests in flight averaged over a
stable window and over a short panic window, and asks for enough replicas that each holds
`target_concurrency` of them.

    ready     = max(1, replicas serving now)
    up_cap    = ⌈max_scale_up_rate × ready⌉          (Knative: 1000: no real cap)
    down_floor= ⌊ready / max_scale_down_rate⌋        (Knative: 2: at most halve per tick)
    stable    = clamp(⌈C_stable / target⌉, down_floor, up_cap)
    panic     = clamp(⌈C_panic  / target⌉, down_floor, up_cap)
    panic mode starts when panic / ready ≥ panic_threshold (Knative: 2.0, "200 %") and ends
              a stable window after the last tick that met it; while in it the fleet never
              shrinks: desired = max(panic, the highest panic count since it began)
    otherwise desired = stable
    desired   = max over the last scale_down_delay_s of the desired counts (scale-down
                delay: a drop must hold that long before it is applied; 0: none)
    desired   = clamp(desired, min_replicas, max_replicas)

`desired_replicas` is one tick's arithmetic, pure; `Autoscaler` keeps what a tick carries to
the next (panic mode, the delay window). Knative's defaults are the dataclass defaults, save
the replica bounds and target, which a serving fleet sets itself.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass

from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.parallel import gpu_share

CEIL_SLACK = 1e-9
"""⌈C / target⌉ is taken of C / target − this: a time average of exactly k × target must ask
for k replicas, not k + 1 from a rounding error."""


@dataclass(frozen=True)
class AutoscalePolicy:
    """The KPA's knobs (module doc); ValueError names a bad one."""

    target_concurrency: float
    min_replicas: int = 1
    max_replicas: int = 8
    stable_window_s: float = 60.0
    panic_window_s: float = 6.0  # Knative: 10 % of the stable window
    panic_threshold: float = 2.0
    scale_down_delay_s: float = 0.0
    tick_s: float = 2.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0

    def __post_init__(self) -> None:
        for name in ("min_replicas", "max_replicas"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if self.max_replicas < max(1, self.min_replicas):
            raise ValueError(f"max_replicas must be >= 1 and >= min_replicas "
                             f"({self.min_replicas}), got {self.max_replicas}")
        for name in ("target_concurrency", "stable_window_s", "panic_window_s", "tick_s",
                     "panic_threshold"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v < math.inf):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if self.panic_window_s > self.stable_window_s:
            raise ValueError(f"panic_window_s ({self.panic_window_s:g}) must not exceed "
                             f"stable_window_s ({self.stable_window_s:g})")
        if not 0 <= self.scale_down_delay_s < math.inf:
            raise ValueError(f"scale_down_delay_s must be >= 0, got {self.scale_down_delay_s!r}")
        if not self.max_scale_up_rate > 1 or not self.max_scale_down_rate > 1:
            raise ValueError("max_scale_up_rate and max_scale_down_rate must be > 1")

    def to_dict(self) -> dict:
        return asdict(self)


def _count(concurrency: float, target: float) -> int:
    return max(0, math.ceil(concurrency / target - CEIL_SLACK))


def _rate_limits(policy: AutoscalePolicy, ready_replicas: int) -> tuple[int, int]:
    ready = max(1, ready_replicas)
    return (math.floor(ready / policy.max_scale_down_rate),
            math.ceil(policy.max_scale_up_rate * ready))


def panic_count(policy: AutoscalePolicy, panic_concurrency: float, ready_replicas: int) -> int:
    """⌈C_panic / target⌉ within the tick's rate limits."""
    low, high = _rate_limits(policy, ready_replicas)
    return min(max(_count(panic_concurrency, policy.target_concurrency), low), high)


def over_panic_threshold(policy: AutoscalePolicy, panic_concurrency: float,
                         ready_replicas: int) -> bool:
    """panic / ready ≥ panic_threshold: a burst the stable window would answer too late."""
    return (panic_count(policy, panic_concurrency, ready_replicas) / max(1, ready_replicas)
            >= policy.panic_threshold)


def desired_replicas(policy: AutoscalePolicy, stable_concurrency: float,
                     panic_concurrency: float, ready_replicas: int, *,
                     panicking: bool = False, panic_floor: int = 0) -> int:
    """One tick's replica count before the scale-down delay (module doc): the stable count,
    or in panic mode the panic count but never below `panic_floor` (the highest panic count
    since panic began); clamped to [min_replicas, max_replicas]."""
    low, high = _rate_limits(policy, ready_replicas)
    want = min(max(_count(stable_concurrency, policy.target_concurrency), low), high)
    if panicking:
        want = max(panic_count(policy, panic_concurrency, ready_replicas), panic_floor)
    return min(max(want, policy.min_replicas), policy.max_replicas)


class Autoscaler:
    """The KPA across ticks: `decide(now_s, stable, panic, ready)` -> the replica count to
    run, carrying panic mode and the scale-down delay window from tick to tick."""

    def __init__(self, policy: AutoscalePolicy) -> None:
        self.policy = policy
        self.panicking = False
        self._last_over_s: float | None = None  # the last tick over the panic threshold
        self._panic_high = 0
        self._recent: deque[tuple[float, int]] = deque()  # (tick, desired) in the delay

    def decide(self, now_s: float, stable_concurrency: float, panic_concurrency: float,
               ready_replicas: int) -> int:
        p = self.policy
        if over_panic_threshold(p, panic_concurrency, ready_replicas):
            self.panicking = True
            self._last_over_s = now_s
        elif self.panicking and now_s - self._last_over_s >= p.stable_window_s:
            self.panicking = False
            self._panic_high = 0
        desired = desired_replicas(p, stable_concurrency, panic_concurrency, ready_replicas,
                                   panicking=self.panicking, panic_floor=self._panic_high)
        if self.panicking:
            self._panic_high = max(self._panic_high, desired)
        recent = self._recent
        recent.append((now_s, desired))
        while recent and recent[0][0] <= now_s - p.scale_down_delay_s and len(recent) > 1:
            recent.popleft()
        return max(d for _, d in recent)


def cold_start_s(cfg: ModelConfig, tp: int, load_gb_per_s: float, startup_s: float,
                 dtype: str = "fp16") -> float:
    """A new replica's time before it serves: each of its t GPUs loads its share of the
    weights at the load bandwidth (all t at once), then the server starts:

        cold_start_s = weight_bytes_per_gpu / (load_gb_per_s × 1e9) + startup_s"""
    if not (0 < load_gb_per_s < math.inf) or not (0 <= startup_s < math.inf):
        raise ValueError(f"the load bandwidth must be > 0 GB/s and the start-up time >= 0 s, "
                         f"got {load_gb_per_s!r} GB/s and {startup_s!r} s")
    weight_bytes = gpu_share(cfg, tp, 1, dtype, dtype).weight_bytes
    return weight_bytes / (load_gb_per_s * 1e9) + startup_s
