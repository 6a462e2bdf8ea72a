"""A replicas fleet that grows and shrinks under the concurrency autoscaler (autoscale.py),
on the simulated clock: the cluster's event loop (cluster.py) with three more kinds of event.

    tick      every policy.tick_s from the first arrival: the requests in flight (arrived,
              not finished, those waiting for a replica included) averaged over the stable
              and panic windows (concurrency.py) give the Autoscaler's count. More than the
              fleet holds: new replicas start, each serving only after `cold_start_s` (its
              GPUs held from the tick on). Fewer: replicas still cold-starting are dropped
              first (newest first), then serving ones drain — the one with the fewest
              outstanding tokens first — taking no new request and given back when their
              own are done (at once when idle).
    ready     a replica's cold start ends: the router may send it requests.
    arrival   the router sends it to a serving replica; with none serving (a fleet of
              min_replicas = 0, or all cold) it waits, as at Knative's activator, and goes
              out when the first replica is ready, its arrival time unchanged (the wait is
              part of its TTFT).

The fleet starts with min_replicas replicas, warm (already serving before the first
arrival). Everything else is the cluster's: each replica the batching lab's scheduler, the
router's policy over the serving replicas.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, replace

from inferlab.engines.cluster.autoscale import AutoscalePolicy, Autoscaler
from inferlab.engines.cluster.autoscale_records import AutoscaleRun, ReplicaLife, ScaleTick
from inferlab.engines.cluster.cluster import ClusterConfig, ClusterResult, ClusterSimulation
from inferlab.engines.cluster.concurrency import ConcurrencyMeter
from inferlab.engines.cluster.layout import COLOCATED, REPLICAS


@dataclass
class _Life:
    started_s: float
    ready_s: float | None = None
    drain_s: float | None = None
    removed_s: float | None = None


class AutoscaledSimulation(ClusterSimulation):
    """`run()` routes `requests` through a fleet of `config.layout.tp`-GPU replicas that
    `policy` scales between its bounds; each new replica cold-starts for `cold_start_s`."""

    def __init__(self, config: ClusterConfig, requests, policy: AutoscalePolicy,
                 cold_start_s: float) -> None:
        if config.layout.kind != REPLICAS:
            raise ValueError(f"autoscaling scales a replicas layout, not {config.layout.kind}")
        if not 0 <= cold_start_s < math.inf:
            raise ValueError(f"cold_start_s must be >= 0, got {cold_start_s!r}")
        self.policy = policy
        self.cold_start_s = cold_start_s
        super().__init__(config, requests)

    def _initial_roles(self) -> tuple[str, ...]:
        return (COLOCATED,) * self.policy.min_replicas

    def run(self, progress=None) -> ClusterResult:
        reqs, engines, p = self.requests, self.engines, self.policy
        t0 = reqs[0].arrival_s if reqs else 0.0
        self._lives = [_Life(t0, ready_s=t0) for _ in engines]
        self._serving = list(range(len(engines)))  # ready, not draining, in index order
        self._booting: list[tuple[float, int]] = []  # (ready_s, instance), a heap
        self._cancelled: set[int] = set()
        self._draining: set[int] = set()
        self._held: deque = deque()  # requests waiting for a serving replica
        self._meter = ConcurrencyMeter(t0)
        self._autoscaler = Autoscaler(p)
        self._ticks: list[ScaleTick] = []
        self._closed = False
        self._next_at = [None] * len(engines)
        self._steps = []
        k, finished, n = 0, 0, len(reqs)
        tick_s = t0
        steps = self._steps
        while True:
            live = finished < n
            a = reqs[k].arrival_s if k < n else math.inf
            while self._booting and self._booting[0][1] in self._cancelled:
                heapq.heappop(self._booting)
            r = self._booting[0][0] if self._booting and live else math.inf
            tick = tick_s if live else math.inf
            while steps and steps[0][0] != self._next_at[steps[0][1]]:
                heapq.heappop(steps)  # stale
            t_step, i_min = steps[0] if steps else (math.inf, -1)
            t = min(a, r, tick, t_step)
            if t == math.inf:
                break
            if r == t:  # a replica ready at t takes the arrivals of t
                self._ready(heapq.heappop(self._booting)[1], t)
            elif a == t:
                self._meter.arrive(t)
                self._held.append(reqs[k])
                k += 1
                self._send_held()
                if progress is not None and k % 500 == 0:
                    progress(k / n, f"{k:,} of {n:,} requests routed")
            elif tick == t:
                self._tick(t)
                tick_s = t0 + len(self._ticks) * p.tick_s
            else:
                heapq.heappop(steps)
                self._next_at[i_min] = None
                engine = engines[i_min]
                record = engine.step()
                self._refresh(i_min)
                if record is not None:
                    self._after_step(i_min, record, [], 0)
                    for _ in record.finished:
                        self._meter.finish(record.end_s)
                    finished += len(record.finished)
                    if i_min in self._draining and engine.done:
                        self._give_back(i_min, engine.now_s)
            if k == n and not self._held and not self._closed:
                self._closed = True  # every request routed: arrivals close everywhere
                for engine in engines:
                    engine.stop_accepting()
        result = self._result()
        end_s = max(t0 + result.makespan_s, t0)
        lives = tuple(ReplicaLife(i, life.started_s, life.ready_s, life.drain_s,
                                  life.removed_s) for i, life in enumerate(self._lives))
        gpus = self.config.layout.gpus_per_instance
        return replace(result, autoscale=AutoscaleRun(p.to_dict(), self.cold_start_s, gpus,
                                                      t0, end_s, lives, tuple(self._ticks)))

    # ---- the fleet ---------------------------------------------------------------------
    def _send_held(self) -> None:
        """Route the waiting requests, in arrival order, while a replica serves."""
        while self._held and self._serving:
            self._route(self._held.popleft(), self._serving, self.front_router)

    def _ready(self, i: int, t: float) -> None:
        self._lives[i].ready_s = t
        self._serving.append(i)
        self._serving.sort()
        self._send_held()

    def _start(self, t: float) -> None:
        i = self._add_instance(COLOCATED)
        self.engines[i].now_s = t + self.cold_start_s  # it runs nothing before it is ready
        self._next_at.append(None)
        self._lives.append(_Life(t))
        if self._closed:
            self.engines[i].stop_accepting()
        if self.cold_start_s == 0:
            self._ready(i, t)
        else:
            heapq.heappush(self._booting, (t + self.cold_start_s, i))

    def _give_back(self, i: int, t: float) -> None:
        self._draining.discard(i)
        self._lives[i].removed_s = t

    def _drain(self, i: int, t: float) -> None:
        self._serving.remove(i)
        self._lives[i].drain_s = t
        self.engines[i].stop_accepting()
        self._draining.add(i)
        if self.engines[i].done:
            self._give_back(i, t)

    def _tick(self, t: float) -> None:
        p, meter = self.policy, self._meter
        meter.advance(t)
        stable = meter.mean(t - p.stable_window_s, t)
        panic = meter.mean(t - p.panic_window_s, t)
        desired = self._autoscaler.decide(t, stable, panic, len(self._serving))
        booting = [i for _, i in self._booting if i not in self._cancelled]
        held = len(self._serving) + len(booting)
        for _ in range(desired - held):
            self._start(t)
        surplus = held - desired
        for i in sorted(booting, reverse=True)[:max(0, surplus)]:  # newest first
            self._cancelled.add(i)
            self._lives[i].removed_s = t
            surplus -= 1
        while surplus > 0:
            i = min(self._serving, key=lambda j: (self.routed[j].outstanding_tokens, -j))
            self._drain(i, t)
            surplus -= 1
        n_booting = sum(1 for _, i in self._booting if i not in self._cancelled)
        self._ticks.append(ScaleTick(t, meter.level, stable, panic, desired,
                                     len(self._serving), n_booting, len(self._draining),
                                     self._autoscaler.panicking))


def run_autoscaled(config: ClusterConfig, requests, policy: AutoscalePolicy,
                   cold_start_s: float) -> ClusterResult:
    return AutoscaledSimulation(config, requests, policy, cold_start_s).run()
