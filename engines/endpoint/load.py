"""Load against a real endpoint: the workload's requests, streamed, timed, scored.

    run = EndpointRun(EndpointSettings(url="http://127.0.0.1:8000", concurrency=32),
                      workload.generate(wl), api_key=os.environ.get("KEY"))
    result = run.run()            # or run.start() ... run.cancel() ... run.wait()

Two ways to pace it: `concurrency=N` keeps N requests in flight (a new one goes out as one
ends; arrival times ignored), `concurrency=None` sends each request at its workload arrival
time (Poisson at a rate, a trace's times) with at most `max_in_flight` open; a request held
back by that cap goes out late and the result says so. Both stop at `max_requests` and
`max_duration_s`; requests still streaming then, or when `cancel()` comes, are cancelled,
their connections closed, and they are counted apart (incomplete), not as failures.

Everything runs on ONE asyncio event loop (in the calling thread for `run`, a worker thread
for `start`): an open stream costs a socket and a small coroutine, not a thread, so hundreds
fit on two cores. The same loop polls the server's /metrics (scrape.Scraper).

Metrics are engines.serve.metrics' own: each finished request becomes a RequestTiming
(client.StreamResult.to_timing) and `summarize` scores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

import httpx

from inferlab.engines.endpoint.client import (
    APIS,
    LENGTH_CONTROLS,
    SERVER_KINDS,
    ClientPool,
    RequestSpec,
    StreamResult,
    TokenCounter,
    make_client,
    request_body,
    stream_one,
)
from inferlab.engines.endpoint.probe import ProbeResult, probe
from inferlab.engines.endpoint.prompts import build_prompt, tokens_per_word
from inferlab.engines.endpoint.routing import ROUTERS, ServerRouter
from inferlab.engines.endpoint.scrape import Scraper, ScrapeResult
from inferlab.engines.endpoint.url import EndpointError, api_root, scrub
from inferlab.engines.serve.metrics import SLO, ServingMetrics, summarize
from inferlab.engines.serve.workload import WorkloadRequest

LATE_S = 0.05  # a request sent this much after its arrival time is "late"
MAX_SERVERS = 64


@dataclass(frozen=True)
class EndpointSettings:
    """Everything a run needs except the API key, which is never part of settings (they go
    into snapshots)."""

    url: str
    model: str | None = None
    api: str = "completions"               # or "chat"
    server_kind: str = "auto"              # "auto" guesses from /v1/models; see LENGTH_CONTROLS
    concurrency: int | None = 8            # None: follow the workload's arrival times
    max_in_flight: int = 256
    max_requests: int | None = None
    max_duration_s: float = 600.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0           # the longest silence: before the first byte, or
                                           # between chunks
    request_timeout_s: float = 600.0
    scrape_hz: float = 2.0                 # 0: do not scrape /metrics
    include_usage: bool = True
    temperature: float | None = 0.0
    shared_prefix_tokens: int = 0
    probe: bool = True
    urls: tuple[str, ...] = ()             # more servers (replicas): the load is spread over
    router: str = "round-robin"            # url + urls by this policy (routing.py)

    def checked(self) -> EndpointSettings:
        """Self, or ValueError naming the field (EndpointError for the URL)."""
        api_root(self.url)
        if not isinstance(self.urls, (tuple, list)) or len(self.urls) > MAX_SERVERS - 1:
            raise ValueError(f"urls: expected at most {MAX_SERVERS - 1} more servers")
        roots = [api_root(self.url)] + [api_root(u) for u in self.urls]
        if len(set(roots)) != len(roots):
            raise ValueError("urls: a server is named twice")
        if self.router not in ROUTERS:
            raise ValueError(f"router: expected one of {', '.join(ROUTERS)}, "
                             f"got {self.router!r}")
        if self.api not in APIS:
            raise ValueError(f"api: expected one of {', '.join(APIS)}, got {self.api!r}")
        if self.server_kind not in ("auto", *SERVER_KINDS):
            raise ValueError(f"server_kind: expected auto or one of {', '.join(SERVER_KINDS)}, "
                             f"got {self.server_kind!r}")
        for name in ("concurrency", "max_requests"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name}: expected an integer >= 1 or None, got {v!r}")
        if not isinstance(self.max_in_flight, int) or not 1 <= self.max_in_flight <= 10_000:
            raise ValueError(f"max_in_flight: expected 1..10000, got {self.max_in_flight!r}")
        for name in ("max_duration_s", "connect_timeout_s", "read_timeout_s",
                     "request_timeout_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                    math.isfinite(v) and v > 0):
                raise ValueError(f"{name}: expected seconds > 0, got {v!r}")
        if not (self.scrape_hz == 0 or 1 <= self.scrape_hz <= 4):
            raise ValueError(f"scrape_hz: expected 0 (off) or 1..4, got {self.scrape_hz!r}")
        return self

    @property
    def in_flight_cap(self) -> int:
        return self.concurrency or self.max_in_flight

    @property
    def all_urls(self) -> tuple[str, ...]:
        return (self.url, *self.urls)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class EndpointRunResult:
    """One run: settings (no key), every request, the serve metrics of the finished ones
    (failures counted in metrics.failed, by kind in `failures`), the scraped series."""

    settings: EndpointSettings
    probe: ProbeResult | None
    results: tuple[StreamResult, ...]
    metrics: ServingMetrics
    failures: dict[str, int]
    incomplete: int                       # cancelled by stop() or the run's max duration
    not_sent: int
    scrape: ScrapeResult = field(default_factory=ScrapeResult)
    notes: tuple[str, ...] = ()
    stopped: str | None = None            # None, "cancelled" or "max duration"
    server_scrapes: tuple[ScrapeResult, ...] = ()  # each server's (scrape: the first one's)
    server_probes: tuple[ProbeResult | None, ...] = ()

    def to_dict(self) -> dict:
        return {"settings": self.settings.to_dict(),
                "probe": None if self.probe is None else asdict(self.probe),
                "metrics": self.metrics.to_dict(), "failures": dict(self.failures),
                "incomplete": self.incomplete, "not_sent": self.not_sent,
                "stopped": self.stopped, "notes": list(self.notes),
                "requests": [r.to_dict() for r in self.results],
                "server_metrics": self.scrape.to_dict(),
                "servers": [{"url": u, "metrics": sc.to_dict()} for u, sc in
                            zip(self.settings.all_urls, self.server_scrapes, strict=False)]}


def server_agreement(result: EndpointRunResult) -> dict:
    """The client's figures beside the server's own counters over the same span (the issue's
    goal: within 10 %). Server TTFT mean = delta(ttft_sum) / delta(ttft_count); server output
    tokens/s = delta(generation_tokens) / the scrapes' time span. None where the server does
    not export the counter. The probe's request is not in either: it ends before the first
    scrape."""
    m, scrape = result.metrics, result.scrape
    out = {"client_ttft_mean_s": m.ttft_s.mean, "client_output_tokens_per_s":
           m.output_tokens_per_s, "server_ttft_mean_s": None,
           "server_output_tokens_per_s": None}
    sums, counts = scrape.delta("ttft_sum_s"), scrape.delta("ttft_count")
    if sums and counts and counts[0] > 0:
        out["server_ttft_mean_s"] = sums[0] / counts[0]
    tokens = scrape.delta("generation_tokens")
    if tokens and tokens[1] > 0:
        out["server_output_tokens_per_s"] = tokens[0] / tokens[1]
    return out


def length_notes(kind: str, results: Sequence[StreamResult]) -> list[str]:
    """Where output lengths may not follow the workload, and where they did not."""
    notes = []
    controls = LENGTH_CONTROLS[kind]
    if "ignore_eos" not in controls:
        told = "min_tokens only" if controls else "neither ignore_eos nor min_tokens"
        notes.append(f"server kind {kind!r} is sent {told}: outputs may end at EOS before "
                     "the workload's length")
    done = [r for r in results if r.ok]
    short = [r for r in done if r.output_tokens < r.requested_tokens]
    if short:
        notes.append(f"{len(short)} of {len(done)} completed requests returned fewer tokens "
                     "than the workload asked for")
    return notes


class EndpointRun:
    """One load run. `run()` blocks; `start()` runs it in a daemon thread and `wait()` gives
    the result; `cancel()` (from any thread) stops it and closes every connection."""

    def __init__(self, settings: EndpointSettings, requests: Sequence[WorkloadRequest],
                 api_key: str | None = None, count_tokens: TokenCounter | None = None,
                 slo: SLO | None = None,
                 on_result: Callable[[StreamResult], None] | None = None) -> None:
        self.settings = settings.checked()
        self.roots = [api_root(u) for u in settings.all_urls]
        self.root = self.roots[0]
        self.requests = list(requests)[:settings.max_requests]
        self._key = api_key or None
        self.count_tokens, self.slo, self.on_result = count_tokens, slo, on_result
        self._results: list[StreamResult] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: str | None = None
        self._stop_event: asyncio.Event | None = None
        self._inflight: set[asyncio.Task] = set()
        self._thread: threading.Thread | None = None
        self._outcome: EndpointRunResult | BaseException | None = None
        self._finished = threading.Event()
        self._scraper: Scraper | None = None
        self._router = ServerRouter(settings.router, len(self.roots))
        # (model, server kind) of a server whose probe found others than the first's
        self._model_kind: list[tuple[str, str] | None] = [None] * len(self.roots)

    def __repr__(self) -> str:  # the key stays out of reprs, logs and tracebacks
        more = f" + {len(self.roots) - 1} servers" if len(self.roots) > 1 else ""
        return f"EndpointRun({self.root!r}{more}, {len(self.requests)} requests)"

    # ---- control, from any thread -------------------------------------------------------------

    def run(self) -> EndpointRunResult:
        try:
            self._outcome = asyncio.run(self._main())
        except BaseException as e:
            self._outcome = e
            raise
        finally:
            self._finished.set()
        return self._outcome

    def start(self) -> None:
        def target():
            try:
                self.run()
            except BaseException:  # kept for wait() to raise in the caller's thread
                pass

        self._thread = threading.Thread(target=target, name="endpoint-load", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> EndpointRunResult | None:
        """The result (None if `timeout` passed first); the run's EndpointError raised here."""
        if not self._finished.wait(timeout):
            return None
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    def cancel(self) -> None:
        self._stopping = self._stopping or "cancelled"
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._halt, "cancelled")
            except RuntimeError:  # the loop closed in between: nothing left to stop
                pass

    def results_so_far(self) -> list[StreamResult]:
        with self._lock:
            return list(self._results)

    def scrape_so_far(self) -> ScrapeResult:
        """The server's common series scraped so far (from any thread; empty before the
        first scrape or with scraping off)."""
        scraper = self._scraper
        return ScrapeResult() if scraper is None else scraper.common_so_far()

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    # ---- inside the loop ----------------------------------------------------------------------

    def _halt(self, reason: str) -> None:
        if self._stopping is None or reason == "cancelled":
            self._stopping = self._stopping or reason
        if self._stop_event is not None:
            self._stop_event.set()
        for task in list(self._inflight):
            task.cancel()

    def _record(self, r: StreamResult) -> None:
        with self._lock:
            self._results.append(r)
        if self.on_result is not None:
            self.on_result(r)

    def _specs(self, model: str, kind: str) -> list[RequestSpec]:
        s = self.settings
        per_word = tokens_per_word(self.count_tokens)
        specs = []
        for i, req in enumerate(self.requests):
            prompt = build_prompt(req, i, s.shared_prefix_tokens, per_word)
            specs.append(RequestSpec(
                index=i, scheduled_s=req.arrival_s, path=APIS[s.api], prompt=prompt,
                prompt_tokens=req.prompt_tokens, requested_tokens=req.output_tokens,
                body=request_body(s.api, model, prompt, req.output_tokens, kind,
                                  s.include_usage, s.temperature)))
        return specs

    async def _one(self, pools: list[ClientPool], spec: RequestSpec, clock) -> None:
        """Send `spec` to the server the router picks, stream it, record it."""
        s = self.settings
        tokens = spec.prompt_tokens + spec.requested_tokens
        j = self._router.choose(spec.prompt, tokens)
        spec = self._for_server(spec, j)
        pool = pools[j]
        client = pool.take()
        task = asyncio.ensure_future(stream_one(
            client, spec, clock, chat=s.api == "chat", read_timeout_s=s.read_timeout_s,
            request_timeout_s=s.request_timeout_s, counter=self.count_tokens,
            secret=self._key))
        self._inflight.add(task)  # _halt cancels it; it then returns a "cancelled" result
        try:
            result = await task
            self._record(replace(result, server=j) if j else result)
        finally:
            self._inflight.discard(task)
            pool.give_back(client)
            self._router.done(j, tokens)

    def _for_server(self, spec: RequestSpec, j: int) -> RequestSpec:
        """The spec with server j's body: its own model name and length controls when its
        probe found others than the first server's."""
        model_kind = self._model_kind[j]
        if j == 0 or model_kind is None:
            return spec
        model, kind = model_kind
        s = self.settings
        return replace(spec, body=request_body(s.api, model, spec.prompt,
                                               spec.requested_tokens, kind, s.include_usage,
                                               s.temperature))

    async def _closed_loop(self, pools, specs, clock) -> None:
        pending = iter(specs)

        async def worker():
            while self._stopping is None:
                spec = next(pending, None)
                if spec is None:
                    return
                spec = replace(spec, scheduled_s=clock())
                await self._one(pools, spec, clock)

        await asyncio.gather(*(worker() for _ in range(self.settings.concurrency)))

    async def _open_loop(self, pools, specs, clock, t_start: float) -> None:
        gate = asyncio.Semaphore(self.settings.max_in_flight)
        sent: list[asyncio.Task] = []

        async def send(spec):
            try:
                await self._one(pools, spec, clock)
            finally:
                gate.release()

        for spec in specs:
            spec = replace(spec, scheduled_s=t_start + spec.scheduled_s)
            delay = spec.scheduled_s - clock()
            if delay > 0:
                try:
                    await asyncio.wait_for(self._stop_event.wait(), delay)
                except asyncio.TimeoutError:
                    pass
            if self._stopping is not None:
                break
            await gate.acquire()
            if self._stopping is not None:
                gate.release()
                break
            sent.append(asyncio.ensure_future(send(spec)))
        await asyncio.gather(*sent)

    async def _main(self) -> EndpointRunResult:
        s = self.settings
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        t0 = time.perf_counter()

        def clock() -> float:
            return time.perf_counter() - t0

        tls = httpx.create_ssl_context()  # one for all clients, http or https
        pools = [ClientPool(lambda root=root: make_client(root, self._key, 1,
                                                          s.connect_timeout_s,
                                                          s.read_timeout_s, tls))
                 for root in self.roots]
        try:
            return await self._drive(pools, clock, tls)
        finally:
            for pool in pools:  # every connection, whatever state its request was left in
                await pool.aclose()

    async def _drive(self, pools: list[ClientPool], clock, tls) -> EndpointRunResult:
        s = self.settings
        # the probes and the scrapers have a client each, off the requests' pools
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(make_client(
                root, self._key, 2, s.connect_timeout_s, s.read_timeout_s, tls))
                for root in self.roots]
            infos: list[ProbeResult | None] = [None] * len(clients)
            model, kind = s.model, s.server_kind
            if s.probe:
                for j, (client, root) in enumerate(zip(clients, self.roots, strict=True)):
                    probing = asyncio.ensure_future(probe(client, root, s.model, s.api,
                                                          s.server_kind, s.include_usage,
                                                          self._key))
                    self._inflight.add(probing)
                    try:
                        infos[j] = await probing
                    except EndpointError as e:
                        if self._stopping is None:
                            if len(clients) > 1:  # say which server
                                raise EndpointError(f"server {j + 1} ({root}): {e}") from None
                            raise
                        return self._result(None, "openai", [])
                    except asyncio.CancelledError:
                        if self._stopping is None:
                            raise
                        return self._result(None, "openai", [])  # cancelled while probing
                    self._inflight.discard(probing)
                model, kind = infos[0].model, infos[0].server_kind
                for j, other in enumerate(infos[1:], start=1):
                    if (other.model, other.server_kind) != (model, kind):
                        self._model_kind[j] = (other.model, other.server_kind)
            elif not model:
                raise EndpointError("give a model name (the probe is off)")
            kind = "openai" if kind == "auto" else kind
            specs = self._specs(model, kind)
            if self._stopping is not None:  # cancel() came before the loop ran
                self._halt(self._stopping)
            scrapers = ([Scraper(c, clock, s.scrape_hz, self._key) for c in clients]
                        if s.scrape_hz else [])
            self._scraper = scrapers[0] if scrapers else None
            scrapings = [asyncio.ensure_future(sc.run()) for sc in scrapers]
            t_start = clock()
            if s.concurrency:
                work = asyncio.ensure_future(self._closed_loop(pools, specs, clock))
            else:
                work = asyncio.ensure_future(self._open_loop(pools, specs, clock, t_start))
            stop = asyncio.ensure_future(self._stop_event.wait())
            await asyncio.wait({work, stop}, timeout=s.max_duration_s,
                               return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                self._halt("cancelled" if self._stop_event.is_set() else "max duration")
            await work
            stop.cancel()
            for scraper, scraping in zip(scrapers, scrapings, strict=True):
                if self._stopping == "cancelled":
                    scraping.cancel()  # no last scrape: cancel means now
                scraper.stop()
                try:
                    await scraping
                except asyncio.CancelledError:
                    pass
        return self._result(infos[0], kind, scrapers, tuple(infos))

    def _result(self, info, kind: str, scrapers: list[Scraper],
                infos: tuple = ()) -> EndpointRunResult:
        results = tuple(sorted(self.results_so_far(), key=lambda r: r.index))
        finished = [r for r in results if r.error_kind != "cancelled"]
        sends = [r.send_s for r in finished]
        duration = max(r.end_s for r in finished) - min(sends) if finished else 0.0
        metrics = summarize([r.to_timing() for r in finished], duration_s=max(0.0, duration),
                            slo=self.slo)
        failures = dict(Counter(r.error_kind for r in finished if not r.ok))
        notes = length_notes(kind, results)
        late = [r.send_s - r.scheduled_s for r in results if r.send_s - r.scheduled_s > LATE_S]
        if late and not self.settings.concurrency:
            notes.append(f"{len(late)} requests went out more than {LATE_S * 1000:.0f} ms late "
                         f"(at most {max(late):.3g} s): the in-flight cap "
                         f"({self.settings.max_in_flight}) or the client's CPU held them back")
        if any(r.token_source == "chunks" for r in finished if r.ok):
            notes.append("the server gave no usage: output tokens counted as chunks")
        scrapes = tuple(sc.result() for sc in scrapers) or (ScrapeResult(
            notes=("scraping off",)),) * len(self.roots)
        scrape = scrapes[0]
        if len(self.roots) > 1:
            sent = self._router.sent
            notes.append(f"{len(self.roots)} servers, {self.settings.router} routing: "
                         + ", ".join(f"{n} to server {j + 1}" for j, n in enumerate(sent)))
        not_sent = len(self.requests) - len(results)
        return EndpointRunResult(
            settings=self.settings, probe=info, results=results, metrics=metrics,
            failures=failures, incomplete=len(results) - len(finished), not_sent=not_sent,
            scrape=scrape, notes=tuple(scrub(n, self._key) for n in notes),
            stopped=self._stopping, server_scrapes=scrapes, server_probes=tuple(infos))
