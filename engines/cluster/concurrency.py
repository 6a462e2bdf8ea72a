"""In-flight requests over time, and their mean over a window: what a concurrency autoscaler
observes (Knative's queue-proxies and activator report requests in flight, the autoscaler
averages them over its windows).

    c(t)                requests arrived and not yet finished at t (a step function)
    mean(start, end)    ∫ c over [start, end] / (end − start); the window is cut at the
                        meter's origin (a run has no traffic before it starts)

Arrivals and finishes may be told in any order as long as none is earlier than the time the
meter was last advanced to: a simulated cluster learns a step's finishes when the step
starts, and its clock never goes back past an autoscaler's tick.
"""

from __future__ import annotations

import bisect
import heapq


class ConcurrencyMeter:
    """c(t) from `arrive(t)` / `finish(t)`; `advance(t)` integrates it up to t, after which
    `mean(start, end)` answers any window with end ≤ t."""

    def __init__(self, origin_s: float = 0.0) -> None:
        self.origin_s = origin_s
        self.now_s = origin_s  # integrated up to here
        self.level = 0  # c(now_s)
        self._pending: list[tuple[float, int]] = []  # (time, +1 / −1) not yet integrated
        # c's change points: at _times[i] the level became _levels[i], with ∫ c up to it
        self._times = [origin_s]
        self._levels = [0]
        self._areas = [0.0]

    def arrive(self, t_s: float) -> None:
        self._add(t_s, +1)

    def finish(self, t_s: float) -> None:
        self._add(t_s, -1)

    def _add(self, t_s: float, delta: int) -> None:
        if t_s < self.now_s:
            raise ValueError(f"an event at {t_s:g} s is before the meter's {self.now_s:g} s")
        heapq.heappush(self._pending, (t_s, delta))

    def advance(self, t_s: float) -> None:
        """Integrate c up to t_s: every event told at or before it is taken."""
        if t_s < self.now_s:
            raise ValueError(f"cannot advance back to {t_s:g} s from {self.now_s:g} s")
        pending = self._pending
        while pending and pending[0][0] <= t_s:
            at, delta = heapq.heappop(pending)
            self._step_to(at, self.level + delta)
        self.now_s = t_s

    def _step_to(self, at: float, level: int) -> None:
        if level < 0:
            raise ValueError(f"more requests finished than arrived by {at:g} s")
        area = self._areas[-1] + self._levels[-1] * (at - self._times[-1])
        if at == self._times[-1]:  # several events at one time: the last level holds
            self._levels[-1] = level
        else:
            self._times.append(at)
            self._levels.append(level)
            self._areas.append(area)
        self.level = level

    def area(self, t_s: float) -> float:
        """∫ c from the origin to t_s (origin ≤ t_s ≤ now_s)."""
        i = bisect.bisect_right(self._times, t_s) - 1
        if i < 0:
            return 0.0
        return self._areas[i] + self._levels[i] * (t_s - self._times[i])

    def mean(self, start_s: float, end_s: float) -> float:
        """The mean of c over [max(start, origin), end]; c(end) for an empty window."""
        if end_s > self.now_s:
            raise ValueError(f"the window ends at {end_s:g} s, past the meter's {self.now_s:g} s")
        start_s = max(start_s, self.origin_s)
        if end_s <= start_s:
            return float(self.level_at(end_s))
        return (self.area(end_s) - self.area(start_s)) / (end_s - start_s)

    def level_at(self, t_s: float) -> int:
        """c(t_s), for origin ≤ t_s ≤ now_s."""
        i = bisect.bisect_right(self._times, t_s) - 1
        return self._levels[max(i, 0)]
