"""The endpoint lab's settings, its run record and snapshot section (`labs.endpoint`), and
its trace events.

Settings: the URL, model, API, server kind, the workload (the batching lab's seeded
generator, or a JSONL trace), the pacing (a fixed concurrency, or the workload's arrival
times), SLOs and limits, and the name of the environment variable holding the API key. The key
itself is never a setting: it is not in this module's records, sections or trace events.

State: every request as the client saw it (send time, chunk arrival times and token counts,
output tokens, error), the scraped /metrics series, the run's notes; the sweep's points and
the side-by-side table when they ran. Metrics: engines/serve/metrics.summarize's dict.
`read_endpoint_section` reads it back strictly with engines/fields' readers (the metrics
by serve.metrics.read_serving_metrics), every field the view draws checked: ValueError
naming the field.

Trace: each request on its own track ("request r0007"): a "waiting" span from send to the
first token, a "streaming" span from there to the last chunk, and the failure, if any, as the
span's argument; the scraped common series as counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from inferlab.engines.endpoint.client import APIS, SERVER_KINDS, StreamResult
from inferlab.engines.endpoint.routing import ROUTERS
from inferlab.engines.endpoint.scrape import COMMON, ScrapeResult
from inferlab.engines.hardware.presets import list_hardware_presets
from inferlab.engines.model.config import list_model_presets
from inferlab.engines.serve import workload
from inferlab.engines.serve.metrics import SLO, read_serving_metrics
from inferlab.engines.serve.scenarios import lognormal_workload, settings_slo
from inferlab.engines.fields import (
    Setting,
    check_settings,
    read_dataclass,
    read_fields,
    read_list,
    read_map,
    read_object,
    read_tuple,
    shown,
)
from inferlab.engines.trace.snapshot import lab_section, section_field

WHERE = "labs.endpoint"

ENDPOINT_DEFAULTS = {
    "url": "http://127.0.0.1:8000",
    "urls": [],                  # more servers (replicas) the load is spread over
    "router": "round-robin",     # how: round-robin, least-tokens, prefix (engines/endpoint/routing)
    "model": "",                 # "": the first model the server lists at /v1/models
    "api": "completions",        # or "chat"
    "server_kind": "auto",
    "api_key_env": "",           # the environment variable holding the key ("": none)
    "workload_file": "",         # a JSONL trace instead of the seeded workload ("": none)
    "requests": 16,
    "rate_per_s": 2.0,
    "prompt_mean": 4.0,          # lognormal: median e^4 ≈ 55 tokens
    "prompt_sigma": 0.3,
    "output_mean": 3.5,          # median e^3.5 ≈ 33 tokens
    "output_sigma": 0.3,
    "seed": 0,
    "concurrency": 4,            # 0: send each request at its arrival time (Poisson, trace)
    "max_in_flight": 256,
    "max_duration_s": 300.0,
    "request_timeout_s": 120.0,
    "read_timeout_s": 30.0,
    "scrape_hz": 2.0,            # 0: do not scrape /metrics
    "slo_ttft_s": 1.0,
    "slo_tpot_s": 0.1,
    "sweep_rates": 3,            # constant rates between the synchronous and throughput runs
    "engine_model": "tiny",      # the side-by-side in-app engine's model (wall clock)
    "model_config": "llama-3-8b",  # the side-by-side simulated GPU's model and hardware
    "hardware": "h100-sxm",
}


def _model_presets():
    return list_model_presets()


def _hardware_presets():
    return list_hardware_presets()


ENDPOINT_SETTINGS = {
    "url": Setting("str"),
    "urls": Setting("str-list", max_len=63),
    "router": Setting("str", choices=ROUTERS),
    "model": Setting("str"),
    "api": Setting("str", choices=tuple(APIS)),
    "server_kind": Setting("str", choices=("auto", *SERVER_KINDS)),
    "api_key_env": Setting("str"),
    "workload_file": Setting("str"),
    "requests": Setting("int", 1, 10_000),
    "rate_per_s": Setting("float", 0.001, 100_000),
    "prompt_mean": Setting("float", 0, 10),
    "prompt_sigma": Setting("float", 0, 3),
    "output_mean": Setting("float", 0, 9),
    "output_sigma": Setting("float", 0, 3),
    "seed": Setting("int", 0, 2**31 - 1),
    "concurrency": Setting("int", 0, 10_000),
    "max_in_flight": Setting("int", 1, 10_000),
    "max_duration_s": Setting("float", 1, 86_400),
    "request_timeout_s": Setting("float", 1, 86_400),
    "read_timeout_s": Setting("float", 0.1, 3_600),
    "scrape_hz": Setting("float", 0, 4),
    "slo_ttft_s": Setting("float", 0.000001, 3600),
    "slo_tpot_s": Setting("float", 0.000001, 3600),
    "sweep_rates": Setting("int", 1, 12),
    "engine_model": Setting("str"),
    "model_config": Setting("str", choices=_model_presets),
    "hardware": Setting("str", choices=_hardware_presets),
}


def check_endpoint_settings(settings, where: str = "settings") -> dict:
    """The settings, strictly checked (ValueError naming the field)."""
    s = check_settings(settings, ENDPOINT_SETTINGS, ENDPOINT_DEFAULTS, where)
    if 0 < s["scrape_hz"] < 1:
        raise ValueError(f"{where}.scrape_hz: expected 0 (off) or 1..4, got {s['scrape_hz']!r}")
    env = s["api_key_env"]
    if env and not (env.replace("_", "a").isalnum() and not env[0].isdigit()):
        raise ValueError(f"{where}.api_key_env: expected an environment variable name, got "
                         f"{shown(env, 40)}")
    return s


# The settings share the batching lab's workload and SLO fields, so its readers read them.
endpoint_slo = settings_slo
endpoint_workload = lognormal_workload


def endpoint_requests(settings: dict) -> list:
    """The run's WorkloadRequests: the trace file's (at most `requests` of them) or the
    seeded workload's. ValueError naming the file when it cannot be read."""
    path = settings["workload_file"]
    if path:
        return workload.read_trace_requests(path)[: int(settings["requests"])]
    return workload.generate(endpoint_workload(settings))


def run_settings(settings: dict, **overrides):
    """The load runner's EndpointSettings for the lab's settings (no key: it is passed
    apart, to EndpointRun)."""
    # here, not at the top: every command imports this section at start-up (the registry);
    # the load runner, the sweep and the batching timeline load with a run or a snapshot
    from inferlab.engines.endpoint.load import EndpointSettings

    s = settings
    fields = dict(
        url=s["url"], urls=tuple(s["urls"]), router=s["router"],
        model=s["model"] or None, api=s["api"], server_kind=s["server_kind"],
        concurrency=s["concurrency"] or None, max_in_flight=s["max_in_flight"],
        max_requests=s["requests"], max_duration_s=float(s["max_duration_s"]),
        read_timeout_s=float(s["read_timeout_s"]),
        request_timeout_s=float(s["request_timeout_s"]), scrape_hz=float(s["scrape_hz"]))
    return EndpointSettings(**(fields | overrides)).checked()


# ---- the run's record --------------------------------------------------------------------------

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
    def of(cls, result) -> EndpointRecord:
        """From a load.EndpointRunResult."""
        from inferlab.engines.endpoint.load import server_agreement  # here: start-up

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


def endpoint_section(settings: dict, record: EndpointRecord | None, sweep=None,
                     side_by_side: dict | None = None) -> dict:
    """The snapshot's `labs.endpoint`. `sweep`: an EndpointSweep; `side_by_side`:
    side_by_side.compare_engines' table."""
    state: dict = {}
    metrics: dict = {}
    if record is not None:
        state["run"] = {
            "requests": [request_dict(r) for r in record.results],
            "failures": dict(record.failures), "incomplete": record.incomplete,
            "not_sent": record.not_sent, "stopped": record.stopped,
            "notes": list(record.notes), "model": record.model,
            "server_kind": record.server_kind, "agreement": dict(record.agreement),
            "server_metrics": scrape_dict(record.scrape)}
        if record.servers:
            state["run"]["servers"] = [{"url": url, "metrics": scrape_dict(scrape)}
                                       for url, scrape in record.servers]
        metrics = dict(record.metrics)
    if sweep is not None:
        state["sweep"] = sweep.to_dict()
    if side_by_side:
        state["side_by_side"] = side_by_side
    return lab_section(settings, state, metrics)


# ---- strict readers ----------------------------------------------------------------------------

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


def read_sweep(d, where: str):
    # here: start-up, as run_settings'
    from inferlab.engines.endpoint.sweep import STRATEGIES, EndpointSweep, EndpointSweepPoint

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


def read_endpoint_section(sec: dict):
    """(settings, EndpointRecord or None, EndpointSweep or None, side-by-side dict or None);
    ValueError naming the bad field."""
    settings = check_endpoint_settings(section_field(sec, "settings", WHERE),
                                       f"{WHERE}.settings")
    state = read_object(section_field(sec, "state", WHERE), f"{WHERE}.state")
    metrics = read_serving_metrics(section_field(sec, "metrics", WHERE), f"{WHERE}.metrics")
    record = None
    if "run" in state:
        if not metrics:
            raise ValueError(f"{WHERE}.metrics: expected the run's metrics")
        record = read_run(state["run"], f"{WHERE}.state.run", metrics)
    sweep = read_sweep(state["sweep"], f"{WHERE}.state.sweep") if "sweep" in state else None
    side = (read_side_by_side(state["side_by_side"], f"{WHERE}.state.side_by_side")
            if "side_by_side" in state else None)
    return settings, record, sweep, side


# ---- the timeline and the trace ----------------------------------------------------------------

def request_segments(results):
    """The client-side Gantt of a run as the batching lab's TimelineSegments: per request
    (row = its index in the workload) WAITING from send to the first token, DECODE
    ("streaming") from the first token to the last chunk; a failed request's whole span is
    PREEMPTED (drawn as "failed"), a cancelled one's STALLED (drawn as "cancelled")."""
    from inferlab.engines.labs.batching.timeline import (  # here: start-up, as run_settings'
        DECODE,
        PREEMPTED,
        STALLED,
        WAITING,
        TimelineSegments,
    )

    ids = tuple(f"r{r.index:04d}" for r in results)
    rows, states, starts, ends = [], [], [], []
    for row, r in enumerate(results):
        if r.error_kind == "cancelled" or (not r.ok and not r.chunk_times_s):
            state = STALLED if r.error_kind == "cancelled" else PREEMPTED
            rows.append(row), states.append(state), starts.append(r.send_s)
            ends.append(r.end_s)
            continue
        first = r.chunk_times_s[0] if r.chunk_times_s else r.end_s
        last = r.chunk_times_s[-1] if r.chunk_times_s else r.end_s
        rows.append(row), states.append(WAITING), starts.append(r.send_s), ends.append(first)
        rows.append(row), states.append(DECODE), starts.append(first), ends.append(last)
        if not r.ok:  # failed mid-stream: the rest of its span, to the failure
            rows.append(row), states.append(PREEMPTED), starts.append(last)
            ends.append(max(last, r.end_s))
    return TimelineSegments(np.array(rows, np.int32), np.array(states, np.uint8),
                            np.array(starts, np.float64), np.array(ends, np.float64),
                            ids, {rid: i for i, rid in enumerate(ids)})


SEGMENT_NAMES = {0: "waiting", 2: "streaming", 3: "failed", 4: "cancelled"}


def endpoint_trace(recorder, record: EndpointRecord, offset_s: float = 0.0) -> None:
    """Each request on its own track (waiting / streaming spans, a failure named in its
    args), and the scraped common series as counters; times shifted by `offset_s`."""
    seg = request_segments(record.results)
    by_row = record.results
    for row, state, a, b in seg.rows():
        r = by_row[row]
        args = {"output_tokens": r.output_tokens, "chunks": len(r.chunk_times_s)}
        if r.error is not None:
            args["error"] = r.error
        recorder.add_span(SEGMENT_NAMES.get(state, "request"), offset_s + a, offset_s + b,
                          cat="endpoint", args=args, track=f"request {seg.request_ids[row]}")
    for key, pts in record.scrape.common.items():
        for t, v in np.asarray(pts).reshape(-1, 2):
            recorder.counter(f"server {key}", {key: float(v)}, ts_s=offset_s + float(t),
                             cat="endpoint")
