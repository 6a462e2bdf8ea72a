"""The rate sweep as guidellm runs it, against a real endpoint.

    1. synchronous: one request at a time          -> the lowest useful rate, r_sync
    2. throughput: everything in flight at once    -> the highest the server sustains, r_max
    3. constant rates evenly spaced between them:  r_sync + k (r_max - r_sync) / (n + 1),
       k = 1..n, Poisson arrivals from engines.serve.workload (same seed, lengths and count)

Each point is a whole EndpointRun; a point holds achieved throughput and p50/p99 TTFT and
TPOT, as the batching lab's sweep does, and the knee is engines.serve.metrics.knee's (the
largest rate whose p99 TTFT and TPOT both meet the SLOs), applied to these points.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from inferlab.engines.endpoint.client import TokenCounter
from inferlab.engines.endpoint.load import EndpointRun, EndpointRunResult, EndpointSettings
from inferlab.engines.hardware.cancel import Cancelled, check_stop
from inferlab.engines.serve.metrics import SLO, knee
from inferlab.engines.serve.workload import Workload, generate

STRATEGIES = ("synchronous", "throughput", "constant")


@dataclass(frozen=True)
class EndpointSweepPoint:
    strategy: str
    rate_per_s: float                 # the target for "constant", else the achieved rate
    achieved_requests_per_s: float
    output_tokens_per_s: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p99_s: float | None
    completed: int
    failed: int
    goodput_requests_per_s: float | None = None

    policy = "endpoint"  # what engines.serve.metrics.knee selects points by

    def meets(self, slo_ttft_s: float, slo_tpot_s: float) -> bool:
        return self.ttft_p99_s is not None and self.ttft_p99_s <= slo_ttft_s and (
            self.tpot_p99_s is None or self.tpot_p99_s <= slo_tpot_s) and self.completed > 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def of(cls, strategy: str, rate_per_s: float | None, run: EndpointRunResult):
        m = run.metrics
        return cls(strategy, float(m.request_throughput if rate_per_s is None else rate_per_s),
                   m.request_throughput, m.output_tokens_per_s, m.ttft_s.p50, m.ttft_s.p99,
                   m.tpot_s.p50, m.tpot_s.p99, m.completed, m.failed,
                   m.goodput_requests_per_s)


@dataclass(frozen=True)
class EndpointSweep:
    points: tuple[EndpointSweepPoint, ...]
    knee: EndpointSweepPoint | None
    slo: SLO | None

    def to_dict(self) -> dict:
        return {"points": [p.to_dict() for p in self.points],
                "knee": None if self.knee is None else self.knee.to_dict(),
                "slo_s": None if self.slo is None else dict(self.slo.__dict__)}


def between(r_sync: float, r_max: float, n: int) -> list[float]:
    """n rates evenly spaced strictly between r_sync and r_max (none if r_max <= r_sync)."""
    if n < 1 or not r_max > r_sync > 0:
        return []
    return [float(r) for r in np.linspace(r_sync, r_max, n + 2)[1:-1]]


def _run(settings: EndpointSettings, requests, api_key, counter, slo, should_stop):
    run = EndpointRun(settings, requests, api_key=api_key, count_tokens=counter, slo=slo)
    run.start()
    while (result := run.wait(0.1)) is None:
        if should_stop is not None and should_stop():
            run.cancel()
    check_stop(should_stop)
    return result


def endpoint_sweep(settings: EndpointSettings, workload: Workload, api_key: str | None = None,
                   n_rates: int = 4, slo: SLO | None = None,
                   count_tokens: TokenCounter | None = None,
                   progress: Callable[[float, str], None] | None = None,
                   should_stop: Callable[[], bool] | None = None) -> EndpointSweep:
    """Synchronous, throughput, then `n_rates` constant rates; Cancelled if stopped."""
    report = progress or (lambda fraction, message: None)
    total = n_rates + 2
    requests = generate(workload)
    report(0.0, "synchronous (1 in flight)")
    sync = _run(replace(settings, concurrency=1), requests, api_key, count_tokens, slo,
                should_stop)
    # the probe found the model and kind once; later runs reuse them
    if sync.probe is not None:
        settings = replace(settings, model=sync.probe.model,
                           server_kind=sync.probe.server_kind, probe=False)
    points = [EndpointSweepPoint.of("synchronous", None, sync)]
    report(1 / total, "throughput (all in flight)")
    flat_out = min(len(requests), settings.max_in_flight)
    best = _run(replace(settings, concurrency=flat_out), requests, api_key, count_tokens, slo,
                should_stop)
    points.append(EndpointSweepPoint.of("throughput", None, best))
    rates = between(points[0].achieved_requests_per_s, points[1].achieved_requests_per_s,
                    n_rates)
    for i, rate in enumerate(rates):
        report((2 + i) / total, f"constant {rate:.3g} req/s ({i + 1}/{len(rates)})")
        paced = generate(replace(workload, arrival="poisson", rate_per_s=rate))
        run = _run(replace(settings, concurrency=None), paced, api_key, count_tokens, slo,
                   should_stop)
        points.append(EndpointSweepPoint.of("constant", rate, run))
    report(1.0, "swept")
    limit_ttft = math.inf if slo is None or slo.ttft_s is None else slo.ttft_s
    limit_tpot = math.inf if slo is None or slo.tpot_s is None else slo.tpot_s
    found = knee(points, "endpoint", limit_ttft, limit_tpot) if slo is not None else None
    return EndpointSweep(tuple(points), found, slo)


__all__ = ["Cancelled", "EndpointSweep", "EndpointSweepPoint", "between", "endpoint_sweep"]
