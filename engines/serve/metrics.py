"""Serving metrics as vLLM's `benchmark_serving` defines them, in one place.

The batching lab (simulated clock), the endpoint lab (client-side timings of a real server) and
the benches all describe each request as a `RequestTiming` and call `summarize`. Definitions,
for a request with arrival a and output token times t_1 <= ... <= t_n:

    TTFT = t_1 - a                       time to first token
    E2E  = t_n - a                       end-to-end latency
    TPOT = (E2E - TTFT) / (n - 1)        time per output token after the first; undefined for
                                         n < 2 and then left out of the TPOT statistics
    ITL  = t_{i+1} - t_i                 inter-token latency, pooled over all requests

A real server's stream arrives in chunks that may carry several tokens each: there
token_times_s holds one time per chunk and token_count the output token count (the server's
`usage`), so that TPOT divides by n_out = token_count and ITL is the gap between chunks, as
`vllm bench serve` measures them.

Percentiles use numpy's default (linear) interpolation, as vLLM does; std is the population
standard deviation (numpy's default, ddof=0). Only requests with ok=True count as completed;
a completed request with no output token has no latency and adds only to the token totals.
Nothing here raises on empty input or an all-failed run: undefined statistics are None.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from inferlab.engines.fields import Setting, read_fields, read_object

DEFAULT_PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class RequestTiming:
    """One request's timeline on the run's clock: when it arrived, when each output token
    became available, and whether it succeeded."""

    arrival_s: float
    token_times_s: tuple[float, ...]
    prompt_tokens: int
    ok: bool = True
    error: str = ""
    token_count: int | None = None  # None: one token per time; else n_out (times are chunks)

    def __post_init__(self) -> None:
        times = tuple(float(t) for t in self.token_times_s)
        object.__setattr__(self, "token_times_s", times)
        if not math.isfinite(self.arrival_s):
            raise ValueError(f"arrival_s must be finite, got {self.arrival_s!r}")
        if not all(math.isfinite(t) for t in times):
            raise ValueError(f"token_times_s must be finite, got {times!r}")
        if any(b < a for a, b in pairwise(times)):
            raise ValueError("token_times_s must be non-decreasing")
        if times and times[0] < self.arrival_s:
            raise ValueError(f"the first token ({times[0]}) precedes arrival_s ({self.arrival_s})")
        if isinstance(self.prompt_tokens, bool) or not isinstance(self.prompt_tokens, int) \
                or self.prompt_tokens < 0:
            raise ValueError(f"prompt_tokens must be an integer >= 0, got {self.prompt_tokens!r}")
        c = self.token_count
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 0):
            raise ValueError(f"token_count must be an integer >= 0 or None, got {c!r}")

    @property
    def output_tokens(self) -> int:
        return len(self.token_times_s) if self.token_count is None else self.token_count


@dataclass(frozen=True)
class SLO:
    """Service-level objectives for goodput (vLLM's --goodput); None = no limit on that metric."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"SLO {name} must be a positive finite number or None, got {v!r}")

    def met_by(self, t: RequestTiming) -> bool:
        """Whether a completed request meets every given objective (limits are inclusive). A
        request with fewer than two tokens has no TPOT and passes a TPOT objective, as in vLLM;
        one with no token at all fails a TTFT or E2E objective."""
        for limit, value in ((self.ttft_s, ttft_s(t)), (self.e2e_s, e2e_s(t))):
            if limit is not None and (value is None or value > limit):
                return False
        tpot = tpot_s(t)
        return self.tpot_s is None or tpot is None or tpot <= self.tpot_s


def knee(points, policy: str, slo_ttft_s: float, slo_tpot_s: float):
    """The highest-rate point of `policy` meeting both SLOs at p99 (None: none does).

    A point is any sweep record with `policy`, `rate_per_s` and `meets(slo_ttft_s,
    slo_tpot_s)`: the batching lab's `SweepPoint`, the endpoint sweep's points. It lives here,
    with the SLOs, so that the endpoint mechanism finds it without importing a lab."""
    ok = [p for p in points if p.policy == policy and p.meets(slo_ttft_s, slo_tpot_s)]
    return max(ok, key=lambda p: p.rate_per_s, default=None)


def ttft_s(t: RequestTiming) -> float | None:
    """TTFT = t_1 - arrival; None without an output token."""
    return t.token_times_s[0] - t.arrival_s if t.token_times_s else None


def e2e_s(t: RequestTiming) -> float | None:
    """E2E = t_n - arrival; None without an output token."""
    return t.token_times_s[-1] - t.arrival_s if t.token_times_s else None


def tpot_s(t: RequestTiming) -> float | None:
    """TPOT = (E2E - TTFT) / (n_out - 1) = (t_n - t_1) / (n_out - 1); None for n_out < 2."""
    n = t.output_tokens
    if n < 2:
        return None
    return (e2e_s(t) - ttft_s(t)) / (n - 1)


def itl_s(timings: Iterable[RequestTiming]) -> list[float]:
    """Pooled inter-token latencies: every gap t_{i+1} - t_i of every request, in order."""
    out: list[float] = []
    for t in timings:
        times = t.token_times_s
        out.extend(b - a for a, b in pairwise(times))
    return out


def percentiles(values: Sequence[float],
                ps: Sequence[float] = DEFAULT_PERCENTILES) -> tuple[float | None, ...]:
    """numpy.percentile(values, ps) with linear interpolation: for sorted x_0..x_{m-1}, p maps
    to rank r = p/100 * (m - 1) and x_floor(r) + (r - floor(r)) * (x_ceil(r) - x_floor(r)).
    All None for no values."""
    if len(values) == 0:
        return tuple(None for _ in ps)
    return tuple(float(v) for v in np.percentile(np.asarray(values, dtype=float), list(ps)))


@dataclass(frozen=True)
class Distribution:
    """Summary statistics of one latency metric, in seconds; None where there are no values."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    std: float | None = None

    @property
    def median(self) -> float | None:
        return self.p50

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        if len(values) == 0:
            return cls()
        arr = np.asarray(values, dtype=float)
        p50, p90, p99 = percentiles(arr, (50, 90, 99))
        return cls(count=len(arr), mean=float(arr.mean()), p50=p50, p90=p90, p99=p99,
                   std=float(arr.std()))

    def to_dict(self) -> dict:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99,
                "std": self.std}


@dataclass(frozen=True)
class ServingMetrics:
    """One run's serving metrics (vLLM benchmark_serving's set). Rates are per second of
    duration_s; goodput is None when no SLO was given."""

    completed: int = 0
    failed: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    duration_s: float = 0.0
    request_throughput: float = 0.0
    output_tokens_per_s: float = 0.0
    total_tokens_per_s: float = 0.0
    ttft_s: Distribution = field(default_factory=Distribution)
    tpot_s: Distribution = field(default_factory=Distribution)
    itl_s: Distribution = field(default_factory=Distribution)
    e2e_s: Distribution = field(default_factory=Distribution)
    goodput_requests_per_s: float | None = None
    slo: SLO | None = None

    def to_dict(self) -> dict:
        """Plain JSON-ready values, unit-suffixed keys; latency entries are {mean, p50, p90,
        p99, std} in seconds."""
        return {
            "completed": self.completed,
            "failed": self.failed,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "duration_s": self.duration_s,
            "request_throughput_per_s": self.request_throughput,
            "output_tokens_per_s": self.output_tokens_per_s,
            "total_tokens_per_s": self.total_tokens_per_s,
            "ttft_s": self.ttft_s.to_dict(),
            "tpot_s": self.tpot_s.to_dict(),
            "itl_s": self.itl_s.to_dict(),
            "e2e_s": self.e2e_s.to_dict(),
            "goodput_requests_per_s": self.goodput_requests_per_s,
            "slo_s": None if self.slo is None else {
                "ttft_s": self.slo.ttft_s, "tpot_s": self.slo.tpot_s, "e2e_s": self.slo.e2e_s},
        }


LATENCY_KEYS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
DISTRIBUTION_KEYS = ("mean", "p50", "p90", "p99", "std")
METRIC_COUNTS = ("completed", "failed", "total_input_tokens", "total_output_tokens")
METRIC_RATES = ("duration_s", "request_throughput_per_s", "output_tokens_per_s",
                "total_tokens_per_s")
METRIC_KEYS = (*METRIC_COUNTS, *METRIC_RATES, *LATENCY_KEYS, "goodput_requests_per_s", "slo_s")


def read_serving_metrics(m, where: str) -> dict:
    """A `ServingMetrics.to_dict()` read back (a snapshot's metrics), every field checked:
    counts integers >= 0, rates and seconds finite and >= 0, each latency an object of
    {mean, p50, p90, p99, std} (null where there were no values), goodput a rate or null,
    slo_s null or {ttft_s, tpot_s, e2e_s} seconds or null. ValueError names the field
    under `where`; {} reads as {} (no run). Fields other than these are left out."""
    if not read_object(m, where):
        return {}
    count, rate = Setting("int", 0), Setting("float", 0)
    maybe = Setting("float", 0, none=True)

    def distribution(d, w):
        return read_fields(d, dict.fromkeys(DISTRIBUTION_KEYS, maybe), w)

    def slo(d, w):
        return None if d is None else read_fields(d, dict.fromkeys(("ttft_s", "tpot_s", "e2e_s"),
                                                                   maybe), w)

    fields = (dict.fromkeys(METRIC_COUNTS, count) | dict.fromkeys(METRIC_RATES, rate)
              | dict.fromkeys(LATENCY_KEYS, distribution)
              | {"goodput_requests_per_s": maybe, "slo_s": slo})
    return read_fields(m, fields, where, optional={"slo_s": None})


def _per_s(amount: float, duration_s: float) -> float:
    return amount / duration_s if duration_s > 0 else 0.0


def summarize(timings: Iterable[RequestTiming], duration_s: float | None = None,
              slo: SLO | None = None) -> ServingMetrics:
    """The run's ServingMetrics. duration_s defaults to the last token time minus the first
    arrival (over all requests); rates are 0 for a zero duration. goodput = (completed requests
    meeting every objective of `slo`) / duration_s."""
    timings = list(timings)
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s >= 0):
        raise ValueError(f"duration_s must be a finite number >= 0, got {duration_s!r}")
    done = [t for t in timings if t.ok]
    if duration_s is None:
        last = [t.token_times_s[-1] for t in timings if t.token_times_s]
        duration_s = max(0.0, max(last) - min(t.arrival_s for t in timings)) if last else 0.0
    total_in = sum(t.prompt_tokens for t in done)
    total_out = sum(t.output_tokens for t in done)
    ttfts = [v for v in map(ttft_s, done) if v is not None]
    tpots = [v for v in map(tpot_s, done) if v is not None]
    e2es = [v for v in map(e2e_s, done) if v is not None]
    goodput = None
    if slo is not None:
        goodput = _per_s(sum(1 for t in done if slo.met_by(t)), duration_s)
    return ServingMetrics(
        completed=len(done),
        failed=len(timings) - len(done),
        total_input_tokens=total_in,
        total_output_tokens=total_out,
        duration_s=float(duration_s),
        request_throughput=_per_s(len(done), duration_s),
        output_tokens_per_s=_per_s(total_out, duration_s),
        total_tokens_per_s=_per_s(total_in + total_out, duration_s),
        ttft_s=Distribution.of(ttfts),
        tpot_s=Distribution.of(tpots),
        itl_s=Distribution.of(itl_s(done)),
        e2e_s=Distribution.of(e2es),
        goodput_requests_per_s=goodput,
        slo=slo,
    )


def cost_per_million_output_tokens(dollars_per_hour: float,
                                   output_tokens_per_s: float) -> float | None:
    """Dollars per 1e6 output tokens = dollars_per_hour / 3600 / output_tokens_per_s * 1e6;
    None when no tokens come out (output_tokens_per_s == 0)."""
    for name, v in (("dollars_per_hour", dollars_per_hour),
                    ("output_tokens_per_s", output_tokens_per_s)):
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    if output_tokens_per_s == 0:
        return None
    return dollars_per_hour / 3600 / output_tokens_per_s * 1e6
