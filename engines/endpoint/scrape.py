"""The server's own Prometheus metrics, polled while the load runs, on the run's clock.

`parse_metrics` reads the text exposition format with prometheus-client's parser and keeps
every numeric sample, named as the server names it, labels folded in sorted by key:
`vllm:kv_cache_usage_perc{model_name="x"}`, `vllm:e2e_request_latency_seconds_bucket{le="1.0",
model_name="x"}`. `Scraper` polls `<root>/metrics` at 1-4 Hz inside the load's event loop;
an endpoint without /metrics (404) is a normal state: noted once, polling stops.

`COMMON` maps each server's names onto a few series the lab draws as strips: running,
waiting, kv_usage_frac (0..1), preemptions (cumulative), and the counters that let the client
check itself against the server (generation tokens, TTFT histogram sum and count). Several
label sets of one name (a model per label, a data-parallel rank per label) are summed, the KV
fraction averaged. SGLang exports no preemption count and llama.cpp none either; newer
llama-server builds dropped kv_cache_usage_ratio (its /slots tells instead; not polled here).

What the server sends is checked before use: a body of at most MAX_BODY_BYTES, UTF-8, that
prometheus-client parses (else a note, and scraping stops); samples that are not finite are
left out; a common value outside its range (COMMON_RANGES: a fraction 0..1, counts and sums
>= 0) is left out of that scrape, noted once per series with the first such value.
"""

from __future__ import annotations

import asyncio
import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from inferlab.engines.endpoint.http_get import get_capped
from inferlab.engines.endpoint.url import scrub

MIN_HZ, MAX_HZ = 1.0, 4.0
MAX_SERIES = 5_000          # series kept per run; a runaway exporter is noted, not followed
MAX_POINTS = 4_000_000      # values kept in all (16 bytes each)
MAX_BODY_BYTES = 8 << 20

COMMON: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs",
                "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs",
                "llamacpp:requests_deferred"),
    "kv_usage_frac": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                      "sglang:token_usage", "llamacpp:kv_cache_usage_ratio"),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "generation_tokens": ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
                          "llamacpp:tokens_predicted_total"),
    "ttft_sum_s": ("vllm:time_to_first_token_seconds_sum",
                   "sglang:time_to_first_token_seconds_sum"),
    "ttft_count": ("vllm:time_to_first_token_seconds_count",
                   "sglang:time_to_first_token_seconds_count"),
    "itl_sum_s": ("vllm:inter_token_latency_seconds_sum",
                  "vllm:time_per_output_token_seconds_sum",
                  "sglang:inter_token_latency_seconds_sum"),
    "itl_count": ("vllm:inter_token_latency_seconds_count",
                  "vllm:time_per_output_token_seconds_count",
                  "sglang:inter_token_latency_seconds_count"),
}
_AVERAGED = {"kv_usage_frac"}
COMMON_RANGES = {"kv_usage_frac": (0.0, 1.0, "a fraction from 0 to 1")}
_AT_LEAST_ZERO = (0.0, math.inf, "a finite number >= 0")
KINDS = {"vllm:": "vllm", "sglang:": "sglang", "llamacpp:": "llama.cpp"}


class MetricsFormatError(ValueError):
    """A /metrics reply that is not Prometheus text."""


def _series_name(name: str, labels: dict) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{labels[k]}"' for k in sorted(labels))
    return f"{name}{{{inner}}}"


def parse_metrics(text: str) -> dict[str, float]:
    """Every finite sample of a Prometheus text exposition, by folded series name."""
    out: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                v = float(s.value)
                if math.isfinite(v):
                    out[_series_name(s.name, s.labels)] = v
    except (ValueError, TypeError, IndexError, KeyError) as e:
        raise MetricsFormatError(f"not Prometheus text ({str(e)[:80] or type(e).__name__})"
                                 ) from None
    return out


def base_name(series: str) -> str:
    return series.split("{", 1)[0]


def checked_common(values: dict[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """The COMMON series found in one scrape, and {server name: why} for those left out
    because they fall outside COMMON_RANGES (a sum of huge values that overflows included)."""
    by_base: dict[str, list[float]] = {}
    for name, v in values.items():
        by_base.setdefault(base_name(name), []).append(v)
    out, bad = {}, {}
    for key, names in COMMON.items():
        for name in names:
            if name in by_base:
                vs = by_base[name]
                v = sum(vs) / len(vs) if key in _AVERAGED else sum(vs)
                low, high, what = COMMON_RANGES.get(key, _AT_LEAST_ZERO)
                if math.isfinite(v) and low <= v <= high:
                    out[key] = v
                else:
                    bad[name] = f"{name} is {v:.6g}, not {what}"
                break
    return out, bad


def common_values(values: dict[str, float]) -> dict[str, float]:
    """The COMMON series found in one scrape (absent and out-of-range ones left out)."""
    return checked_common(values)[0]


def server_kind(names) -> str | None:
    for name in names:
        for prefix, kind in KINDS.items():
            if name.startswith(prefix):
                return kind
    return None


@dataclass(frozen=True)
class ScrapeResult:
    """The scraped series: each a (k, 2) array of (time_s, value), on the run's clock."""

    series: dict[str, object] = field(default_factory=dict)
    common: dict[str, object] = field(default_factory=dict)
    kind: str | None = None
    scrapes: int = 0
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"kind": self.kind, "scrapes": self.scrapes, "notes": list(self.notes),
                "common": {k: v.tolist() for k, v in self.common.items()},
                "series": {k: v.tolist() for k, v in self.series.items()}}

    def delta(self, key: str) -> tuple[float, float] | None:
        """(value change, time span) of a common counter between the first and last scrape."""
        pts = self.common.get(key)
        if pts is None or len(pts) < 2:
            return None
        return float(pts[-1][1] - pts[0][1]), float(pts[-1][0] - pts[0][0])


class _Store:
    def __init__(self) -> None:
        self.times: dict[str, array] = {}
        self.values: dict[str, array] = {}
        self.points = 0
        self.full = False

    def add(self, name: str, t: float, v: float) -> None:
        if name not in self.times:
            if len(self.times) >= MAX_SERIES:
                self.full = True
                return
            self.times[name], self.values[name] = array("d"), array("d")
        if self.points >= MAX_POINTS:
            self.full = True
            return
        self.times[name].append(t)
        self.values[name].append(v)
        self.points += 1

    def arrays(self) -> dict:
        return {k: np.column_stack((np.frombuffer(self.times[k]),
                                    np.frombuffer(self.values[k]))) for k in self.times}


class Scraper:
    """Polls /metrics in the caller's event loop until `stop()`; `result()` after."""

    def __init__(self, client: httpx.AsyncClient, clock: Callable[[], float], hz: float = 2.0,
                 secret: str | None = None, timeout_s: float = 2.0) -> None:
        self.client, self.clock, self.secret = client, clock, secret
        self.timeout_s = timeout_s
        self._bad_common: set[str] = set()
        self.period_s = 1.0 / min(MAX_HZ, max(MIN_HZ, float(hz)))
        self.notes: list[str] = []
        self.scrapes = 0
        self.names: set[str] = set()
        self._all, self._common = _Store(), _Store()
        self._stop = asyncio.Event()
        self._gave_up = False

    def _note(self, text: str) -> None:
        text = scrub(text, self.secret)
        if text not in self.notes:
            self.notes.append(text)

    async def scrape_once(self) -> None:
        """One poll: fetch, parse (off the loop's thread: a big exposition takes
        milliseconds that would otherwise delay the streams' chunk times), store."""
        if self._gave_up:
            return
        try:
            status, body = await self._fetch()
        except httpx.HTTPError as e:
            self._note(f"/metrics could not be read ({type(e).__name__}); still trying")
            return
        t = self.clock()
        if status == 404:
            self._stop_with("no /metrics")
            return
        if status != 200:
            self._stop_with(f"/metrics answered HTTP {status}; scraping stopped")
            return
        if len(body) > MAX_BODY_BYTES:
            self._stop_with(f"/metrics is over {MAX_BODY_BYTES:,} bytes; scraping stopped")
            return
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            self._stop_with(f"/metrics is not UTF-8 text (byte {e.start}); scraping stopped")
            return
        loop = asyncio.get_running_loop()
        try:
            values = await loop.run_in_executor(None, parse_metrics, text)
        except MetricsFormatError as e:
            self._stop_with(f"/metrics is {e}; scraping stopped")
            return
        self.scrapes += 1
        self.names.update(values)
        for name, v in values.items():
            self._all.add(name, t, v)
        common, bad = checked_common(values)
        for name, v in common.items():
            self._common.add(name, t, v)
        for name, why in bad.items():
            if name not in self._bad_common:
                self._bad_common.add(name)
                self._note(f"/metrics: {why}; such values are left out")

    async def _fetch(self) -> tuple[int, bytes]:
        """GET /metrics: the status and the body, read to MAX_BODY_BYTES and a piece more."""
        resp, body = await get_capped(self.client, "/metrics", MAX_BODY_BYTES, self.timeout_s)
        return resp.status_code, body

    def _stop_with(self, note: str) -> None:
        self._note(note)
        self._gave_up = True

    async def run(self) -> None:
        """Scrape now and every period until stopped, then once more (the counters' last
        values, for comparing with the client's own figures)."""
        while not self._stop.is_set() and not self._gave_up:
            started = self.clock()
            await self.scrape_once()
            wait = self.period_s - (self.clock() - started)
            try:
                await asyncio.wait_for(self._stop.wait(), max(0.0, wait))
            except asyncio.TimeoutError:
                pass
        await self.scrape_once()

    def stop(self) -> None:
        self._stop.set()

    def common_so_far(self) -> ScrapeResult:
        """The common series scraped so far, safe to call from another thread while the
        scraper runs (each array copied whole under the GIL; a pair caught between its time
        and its value is cut to the shorter)."""
        times, values = dict(self._common.times), dict(self._common.values)
        common = {}
        for k in times:
            t, v = array("d", times[k]), array("d", values[k])
            n = min(len(t), len(v))
            common[k] = np.column_stack((np.frombuffer(t, count=n), np.frombuffer(v, count=n)))
        return ScrapeResult(common=common, kind=server_kind(list(self.names)),
                            scrapes=self.scrapes, notes=tuple(self.notes))

    def result(self) -> ScrapeResult:
        notes = list(self.notes)
        if self._all.full:
            notes.append(f"more than {MAX_SERIES:,} series or {MAX_POINTS:,} values: "
                         "the rest were not kept")
        return ScrapeResult(series=self._all.arrays(), common=self._common.arrays(),
                            kind=server_kind(self.names), scrapes=self.scrapes,
                            notes=tuple(notes))
