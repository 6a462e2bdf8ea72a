"""Goodput as DistServe defines it: the request rate a layout serves with at least
`attainment` (90 % by default) of its requests within BOTH the TTFT and the TPOT objective,
per GPU.

    slo_attainment    the share of requests that completed within both objectives
                      (metrics.SLO.met_by: TTFT = t_1 − arrival, TPOT = (t_n − t_1)/(n − 1))
    score_run         one run: its metrics, its attainment and its goodput per GPU — the
                      SLO-meeting requests per second of its duration, over its GPUs, when
                      the attainment reaches the goal; 0 when it does not (the layout
                      cannot serve this load)
    max_goodput_per_gpu  DistServe's figure: the highest arrival rate of the same requests
                      (their arrival times scaled) whose run reaches the goal, over the GPUs;
                      found by doubling then bisecting the rate, each probe a full run
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from inferlab.engines.cluster.cluster import ClusterConfig, ClusterResult, run_cluster
from inferlab.engines.serve.metrics import SLO, RequestTiming, ServingMetrics, summarize
from inferlab.engines.serve.request import Request

DEFAULT_ATTAINMENT = 0.9


def slo_attainment(timings: list[RequestTiming], slo: SLO) -> float:
    """Requests that completed within every objective of `slo` / all requests (0 for none)."""
    if not timings:
        return 0.0
    return sum(1 for t in timings if t.ok and slo.met_by(t)) / len(timings)


@dataclass(frozen=True)
class RunScore:
    """One run judged by its SLOs: its serving metrics (goodput under `slo`), the share of
    requests within both objectives, and goodput per GPU (0 below the attainment goal)."""

    metrics: ServingMetrics
    attainment: float
    goodput_per_gpu: float


def score_run(result: ClusterResult, slo: SLO,
              attainment: float = DEFAULT_ATTAINMENT) -> RunScore:
    """The run's RunScore, its timings and metrics computed once."""
    timings = result.timings()
    got = slo_attainment(timings, slo)
    metrics = summarize(timings, slo=slo)
    per_gpu = 0.0 if got < attainment else (
        (metrics.goodput_requests_per_s or 0.0) / result.config.layout.n_gpus)
    return RunScore(metrics, got, per_gpu)


def offered_rate_per_s(requests: list[Request]) -> float:
    """(n − 1) / (last arrival − first arrival): the requests' arrival rate (inf when they
    all arrive at once)."""
    times = sorted(r.arrival_s for r in requests)
    span = times[-1] - times[0] if times else 0.0
    return (len(times) - 1) / span if span > 0 else math.inf


def at_rate(requests: list[Request], rate_per_s: float) -> list[Request]:
    """The same requests, their arrival times scaled (about the first) to `rate_per_s`."""
    base = offered_rate_per_s(requests)
    t0 = min(r.arrival_s for r in requests)
    factor = base / rate_per_s
    return [replace(r, arrival_s=t0 + (r.arrival_s - t0) * factor) for r in requests]


@dataclass(frozen=True)
class RateProbe:
    rate_per_s: float
    attainment: float


@dataclass(frozen=True)
class MaxGoodput:
    goodput_per_gpu: float  # the highest passing rate / GPUs (0: none passed)
    rate_per_s: float
    probes: tuple[RateProbe, ...]
    capped: bool = False  # every probe passed: the goodput is at least this


def max_goodput_per_gpu(config: ClusterConfig, requests, slo: SLO,
                        attainment: float = DEFAULT_ATTAINMENT, *, start_rate_per_s:
                        float | None = None, doublings: int = 6,
                        bisections: int = 4) -> MaxGoodput:
    """DistServe's goodput: from a start rate, double (or halve) the rate until the goal is
    crossed, then bisect the bracket (in log rate) `bisections` times.

    `requests`: a list (scaled with `at_rate`; the start is its own rate), or a function
    rate -> requests for an arrival process drawn at each rate (then give the start). A fixed
    list at a high rate is one burst whose last TTFT is bounded by the work, not the rate:
    draw as many requests as a fixed arrival window holds to see overload."""
    probes: list[RateProbe] = []
    if callable(requests):
        requests_at = requests
        if start_rate_per_s is None:
            raise ValueError("a function of the rate needs start_rate_per_s")
    else:
        listed = list(requests)
        requests_at = lambda rate: at_rate(listed, rate)  # noqa: E731
        if start_rate_per_s is None:
            start_rate_per_s = offered_rate_per_s(listed)

    def passes(rate: float) -> bool:
        result = run_cluster(config, requests_at(rate))
        got = slo_attainment(result.timings(), slo)
        probes.append(RateProbe(rate, got))
        return got >= attainment

    rate = start_rate_per_s
    if not math.isfinite(rate) or rate <= 0:
        raise ValueError("the requests all arrive at once: they have no rate to scale")
    if passes(rate):
        good, bad = rate, None
        for _ in range(doublings):
            if not passes(rate := rate * 2):
                bad = rate
                break
            good = rate
    else:
        good, bad = None, rate
        for _ in range(doublings):
            if passes(rate := rate / 2):
                good = rate
                break
            bad = rate
    if good is not None and bad is not None:
        for _ in range(bisections):
            mid = math.sqrt(good * bad)
            if passes(mid):
                good = mid
            else:
                bad = mid
    n_gpus = config.layout.n_gpus
    return MaxGoodput(0.0 if good is None else good / n_gpus, good or 0.0, tuple(probes),
                      capped=bad is None)
