"""The endpoint lab's records: a run as the lab draws it and the snapshot keeps it
(`EndpointRecord`: every request as the client saw it, the scraped /metrics series, the
run's notes; nothing holds the key), their JSON form, and `EndpointSnapshot`, all the lab
draws from a snapshot: the settings, the run, the rate sweep, the side-by-side table.

The readers take the JSON back strictly with engines/fields' readers (the metrics by
serve.metrics.read_serving_metrics), every field the view draws checked: ValueError naming
the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from inferlab.engines.endpoint.client import StreamResult
from inferlab.engines.endpoint.load import EndpointRunResult, server_agreement
from inferlab.engines.endpoint.scrape import COMMON, ScrapeResult
from inferlab.engines.endpoint.sweep import STRATEGIES, EndpointSweep, EndpointSweepPoint
from inferlab.engines.fields import (
    Setting,
    read_dataclass,
    read_fields,
    read_list,
    read_map,
    read_tuple,
)
from inferlab.engines.serve.metrics import SLO, read_serving_metrics

AGREEMENT_KEYS = ("client_ttft_mean_s", "client_output_tokens_per_s", "server_ttft_mean_s",
                  "server_output_tokens_per_s")
"""load.server_agreement's figures (the client's beside the server's), each null or >= 0."""


@dataclass(frozen=True)
class EndpointRecord:
    """One run as the lab draws it and the snapshot keeps it (nothing here holds the key)."""

    results: tuple[StreamResult, ...]
    metrics: dict                       # ServingMetrics.to_dict()
    failures: dict[str, int] = field(default_factory=dict)
    incomplete: int = 0
    not_sent: int = 0
    stopped: str | None = None
    notes: tuple[str, ...] = ()
    scrape: ScrapeResult = field(default_factory=ScrapeResult)
    model: str | None = None            # as the probe found it
    server_kind: str | None = None
    agreement: dict = field(  # load.server_agreement: AGREEMENT_KEYS' figures
        default_factory=lambda: dict.fromkeys(AGREEMENT_KEYS))
    servers: tuple[tuple[str, ScrapeResult], ...] = ()  # (url, its /metrics) per server, when
                                                        # the run drove more than one

    @classmethod
    def of(cls, result: EndpointRunResult) -> EndpointRecord:
        """From a load run's result."""
        probe = result.probe
        return cls(results=tuple(result.results), metrics=result.metrics.to_dict(),
                   failures=dict(result.failures), incomplete=result.incomplete,
                   not_sent=result.not_sent, stopped=result.stopped, notes=tuple(result.notes),
                   scrape=result.scrape,
                   model=probe.model if probe else result.settings.model,
                   server_kind=probe.server_kind if probe else result.settings.server_kind,
                   agreement=server_agreement(result),
                   servers=tuple(zip(result.settings.all_urls, result.server_scrapes,
                                     strict=False)) if result.settings.urls else ())

    @property
    def has_metrics(self) -> bool:
        """The server answered /metrics with at least one scrape."""
        return self.scrape.scrapes > 0

    def scrape_note(self) -> str:
        """One plain sentence about the server's /metrics."""
        notes = self.scrape.notes
        if "no /metrics" in notes:
            return "This server exports no /metrics (a normal state): only the client's " \
                   "own timings."
        if "scraping off" in notes:
            return "Scraping /metrics was off for this run."
        if not self.has_metrics:
            return "No /metrics sample was read" + (f": {notes[0]}" if notes else ".")
        kind = self.scrape.kind or "unrecognised"
        return (f"{self.scrape.scrapes} scrapes of /metrics ({kind} names, "
                f"{len(self.scrape.series)} series)" + (f"; {'; '.join(notes)}" if notes else ""))


REQUEST_KEYS = ("index", "scheduled_s", "send_s", "end_s", "chunk_times_s", "chunk_tokens",
                "output_tokens", "token_source", "prompt_tokens", "requested_tokens",
                "finish_reason", "http_status", "error", "error_kind", "server")


def request_dict(r: StreamResult) -> dict:
    """What the snapshot keeps of a request: timings, counts, the failure (not the text)."""
    d = {k: getattr(r, k) for k in REQUEST_KEYS}
    d.update(chunk_times_s=list(r.chunk_times_s), chunk_tokens=list(r.chunk_tokens),
             ttft_s=r.ttft_s, e2e_s=r.e2e_s)
    return d


def scrape_dict(scrape: ScrapeResult) -> dict:
    return scrape.to_dict()


# ---- the JSON form read back strictly ------------------------------------------------------------

MAX_REQUESTS = 100_000
MAX_CHUNKS = 5_000_000      # chunk times in one section, all requests together
MAX_SERIES = 5_000
MAX_POINTS = 4_000_000

SECONDS = Setting("float", -1e9, 1e9)   # on the run's clock
COUNT = Setting("int", 0)
RATE = Setting("float", 0, none=True)   # null: the figure is not known
_SOURCES = ("usage", "tokenizer", "chunks")


def _notes(max_len: int):
    note = Setting("str", max_len=2000)
    return lambda v, where: tuple(read_list(v, note, where, max_len))


REQUEST_FIELDS = {
    "index": Setting("int", 0, MAX_REQUESTS), "scheduled_s": SECONDS, "send_s": SECONDS,
    "end_s": SECONDS, "chunk_tokens": Setting("int-list", 1, max_len=MAX_CHUNKS),
    "output_tokens": COUNT, "token_source": Setting("str", choices=_SOURCES),
    "prompt_tokens": COUNT, "requested_tokens": COUNT,
    "finish_reason": Setting("str", none=True, max_len=100),
    "http_status": Setting("int", 100, 599, none=True),
    "error": Setting("str", none=True, max_len=2000),
    "error_kind": Setting("str", none=True, max_len=40),
    "server": Setting("int", 0, 63),
}


def read_request(d, where: str, budget: list[int]) -> StreamResult:
    """One request's dict back as a StreamResult; `budget`: chunk times left to read."""
    times = Setting("float-list", -1e9, 1e9, max_len=budget[0])
    f = read_fields(d, {"chunk_times_s": times} | REQUEST_FIELDS, where,
                    optional={"server": 0})  # a snapshot of one server has none
    times = f["chunk_times_s"] = tuple(f["chunk_times_s"])
    f["chunk_tokens"] = tuple(f["chunk_tokens"])
    budget[0] -= len(times)
    if len(f["chunk_tokens"]) != len(times):
        raise ValueError(f"{where}.chunk_tokens: expected one count per chunk time")
    if any(b < a for a, b in zip(times, times[1:], strict=False)):
        raise ValueError(f"{where}.chunk_times_s: expected non-decreasing times")
    if times and (times[0] < f["send_s"] - 1e-9 or times[-1] > f["end_s"] + 1e-9):
        raise ValueError(f"{where}.chunk_times_s: expected times between send_s and end_s")
    if f["end_s"] < f["send_s"]:
        raise ValueError(f"{where}.end_s: expected end_s >= send_s")
    if (f["error"] is None) != (f["error_kind"] is None):
        raise ValueError(f"{where}.error_kind: expected a kind exactly when there is an error")
    return StreamResult(**f)


_POINT = (SECONDS, Setting("float"))
_COMMON_NAME = Setting("str", choices=tuple(COMMON))


def read_scrape(d, where: str) -> ScrapeResult:
    """A ScrapeResult.to_dict() back: each series a list of [time_s, value] in time order,
    MAX_POINTS of them in all."""
    budget = [MAX_POINTS]

    def points(v, w) -> np.ndarray:
        rows = read_list(v, lambda p, pw: read_tuple(p, _POINT, pw, "[time_s, value]"), w,
                         budget[0])
        budget[0] -= len(rows)
        out = np.array(rows, dtype=np.float64).reshape(-1, 2)
        if len(out) > 1 and np.any(np.diff(out[:, 0]) < 0):
            raise ValueError(f"{w}: expected times in order")
        return out

    f = read_fields(d, {
        "kind": Setting("str", none=True, max_len=40), "scrapes": COUNT, "notes": _notes(100),
        "common": lambda v, w: read_map(v, points, w, keys=_COMMON_NAME),
        "series": lambda v, w: read_map(v, points, w, MAX_SERIES, keys=Setting("str"))},
        where)
    return ScrapeResult(**f)


def read_run(d, where: str, metrics: dict) -> EndpointRecord:
    """The run's dict back as an EndpointRecord (its metrics read apart)."""
    budget = [MAX_CHUNKS]
    f = read_fields(d, {
        "requests": lambda v, w: tuple(read_list(
            v, lambda r, rw: read_request(r, rw, budget), w, MAX_REQUESTS)),
        "failures": lambda v, w: read_map(v, COUNT, w, keys=Setting("str", max_len=40)),
        "incomplete": COUNT, "not_sent": COUNT,
        "stopped": Setting("str", none=True, choices=("cancelled", "max duration")),
        "notes": _notes(1000), "server_metrics": read_scrape,
        "model": Setting("str", none=True, max_len=1000),
        "server_kind": Setting("str", none=True, max_len=40),
        "agreement": lambda v, w: read_fields(v, dict.fromkeys(AGREEMENT_KEYS, RATE), w),
        "servers": lambda v, w: tuple(read_list(v, _server, w, 64))},
        where, optional={"servers": ()})
    n_servers = max(1, len(f["servers"]))
    for i, r in enumerate(f["requests"]):
        if r.server >= n_servers:
            raise ValueError(f"{where}.requests[{i}].server: no server {r.server} (the run "
                             f"had {n_servers})")
    return EndpointRecord(results=f.pop("requests"), metrics=metrics,
                          scrape=f.pop("server_metrics"), **f)


def _server(d, where: str) -> tuple[str, ScrapeResult]:
    f = read_fields(d, {"url": Setting("str", max_len=2000), "metrics": read_scrape}, where)
    return f["url"], f["metrics"]


SWEEP_POINT_FIELDS = {
    "rate_per_s": Setting("float", 0), "achieved_requests_per_s": Setting("float", 0),
    "output_tokens_per_s": Setting("float", 0), "ttft_p50_s": RATE, "ttft_p99_s": RATE,
    "tpot_p50_s": RATE, "tpot_p99_s": RATE, "completed": COUNT, "failed": COUNT,
    "goodput_requests_per_s": RATE,
}


def read_sweep(d, where: str) -> EndpointSweep:
    fields = {"strategy": Setting("str", choices=STRATEGIES)} | SWEEP_POINT_FIELDS

    def point(p, w):
        return EndpointSweepPoint(**read_fields(p, fields, w))

    f = read_fields(d, {
        "points": lambda v, w: tuple(read_list(v, point, w, 100)),
        "knee": lambda v, w: None if v is None else point(v, w),
        "slo_s": lambda v, w: None if v is None else read_dataclass(
            SLO, v, w, dict.fromkeys(("ttft_s", "tpot_s", "e2e_s"), RATE))}, where)
    return EndpointSweep(f["points"], f["knee"], f["slo_s"])


SIDE_COLUMNS = ("endpoint", "engine", "simulated")
_COLUMN_FIELDS = {"title": Setting("str", max_len=200), "metrics": read_serving_metrics}


def read_side_by_side(d, where: str) -> dict:
    """side_by_side.compare_engines' table: {"columns": {name: {"title", "metrics"}},
    "notes"}, each column's metrics a ServingMetrics dict (other fields left out)."""
    return read_fields(d, {
        "columns": lambda v, w: read_map(v, lambda c, cw: read_fields(c, _COLUMN_FIELDS, cw),
                                         w, keys=Setting("str", choices=SIDE_COLUMNS)),
        "notes": _notes(100)}, where)


@dataclass(frozen=True)
class EndpointSnapshot:
    """The snapshot's `labs.endpoint` as read once (`read_endpoint_section`): what the lab's
    panels and its comparison plots draw."""

    settings: dict  # check_endpoint_settings' dict (the key's variable name, never the key)
    run: EndpointRecord | None  # None: the lab had not run
    sweep: EndpointSweep | None  # the rate sweep, when it ran
    side_by_side: dict | None  # read_side_by_side's table, when it ran
