"""The endpoint lab's settings, its run record and snapshot section (`labs.endpoint`), and
its trace events.

Settings: the URL, model, API, server kind, the workload (the batching lab's seeded
generator, or a JSONL trace), the pacing (a fixed concurrency, or the workload's arrival
times), SLOs and limits, and the name of the environment variable holding the API key. The key
itself is never a setting: it is not in this module's records, sections or trace events.

State: every request as the client saw it (send time, chunk arrival times and token counts,
output tokens, error), the scraped /metrics series, the run's notes; the sweep's points and
the side-by-side table when they ran. Metrics: engines/serve/metrics.summarize's dict.
`read_endpoint_section` reads it back strictly (ValueError naming the field).

Trace: each request on its own track ("request r0007"): a "waiting" span from send to the
first token, a "streaming" span from there to the last chunk, and the failure, if any, as the
span's argument; the scraped common series as counters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from inferlab.engines.endpoint.client import APIS, SERVER_KINDS, StreamResult
from inferlab.engines.endpoint.scrape import COMMON, ScrapeResult
from inferlab.engines.serve.metrics import SLO
from inferlab.engines.servelab.section import batching_slo, batching_workload
from inferlab.engines.settings import Setting, check_settings
from inferlab.engines.trace.snapshot import lab_section, section_field

WHERE = "labs.endpoint"

ENDPOINT_DEFAULTS = {
    "url": "http://127.0.0.1:8000",
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
    from inferlab.engines.model.config import list_model_presets

    return list_model_presets()


def _hardware_presets():
    from inferlab.engines.hardware.presets import list_hardware_presets

    return list_hardware_presets()


ENDPOINT_SETTINGS = {
    "url": Setting("str"),
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
    if isinstance(settings, dict):
        for key, value in settings.items():  # integers no float holds: refused by name
            if isinstance(value, int) and value.bit_length() > 53 and key in ENDPOINT_SETTINGS:
                raise ValueError(f"{where}.{key}: expected a number in range, got an integer "
                                 f"of {value.bit_length()} bits")
    s = check_settings(settings, ENDPOINT_SETTINGS, ENDPOINT_DEFAULTS, where)
    if 0 < s["scrape_hz"] < 1:
        raise ValueError(f"{where}.scrape_hz: expected 0 (off) or 1..4, got {s['scrape_hz']!r}")
    env = s["api_key_env"]
    if env and not (env.replace("_", "a").isalnum() and not env[0].isdigit()):
        raise ValueError(f"{where}.api_key_env: expected an environment variable name, got "
                         f"{env[:40]!r}")
    return s


# The settings share the batching lab's workload and SLO fields, so its readers read them.
endpoint_slo = batching_slo
endpoint_workload = batching_workload


def endpoint_requests(settings: dict) -> list:
    """The run's WorkloadRequests: the trace file's (at most `requests` of them) or the
    seeded workload's. ValueError naming the file when it cannot be read."""
    from inferlab.engines.serve import workload

    path = settings["workload_file"]
    if path:
        items = workload.read_trace(path)
        if not items:
            raise ValueError(f"{path}: the trace holds no request")
        return items[: int(settings["requests"])]
    return workload.generate(endpoint_workload(settings))


def run_settings(settings: dict, **overrides):
    """The load runner's EndpointSettings for the lab's settings (no key: it is passed
    apart, to EndpointRun)."""
    from inferlab.engines.endpoint.load import EndpointSettings

    s = settings
    fields = dict(
        url=s["url"], model=s["model"] or None, api=s["api"], server_kind=s["server_kind"],
        concurrency=s["concurrency"] or None, max_in_flight=s["max_in_flight"],
        max_requests=s["requests"], max_duration_s=float(s["max_duration_s"]),
        read_timeout_s=float(s["read_timeout_s"]),
        request_timeout_s=float(s["request_timeout_s"]), scrape_hz=float(s["scrape_hz"]))
    return EndpointSettings(**(fields | overrides)).checked()


# ---- the run's record --------------------------------------------------------------------------

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
    agreement: dict = field(default_factory=dict)  # load.server_agreement

    @classmethod
    def of(cls, result) -> EndpointRecord:
        """From a load.EndpointRunResult."""
        from inferlab.engines.endpoint.load import server_agreement

        probe = result.probe
        return cls(results=tuple(result.results), metrics=result.metrics.to_dict(),
                   failures=dict(result.failures), incomplete=result.incomplete,
                   not_sent=result.not_sent, stopped=result.stopped, notes=tuple(result.notes),
                   scrape=result.scrape,
                   model=probe.model if probe else result.settings.model,
                   server_kind=probe.server_kind if probe else result.settings.server_kind,
                   agreement=server_agreement(result))

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
                "finish_reason", "http_status", "error", "error_kind")


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


def _num(low: float = 0.0, high: float = math.inf, none: bool = False) -> Callable:
    def read(v, where):
        if v is None and none:
            return None
        if isinstance(v, int) and v.bit_length() > 1000:  # more than a float holds
            raise ValueError(f"{where}: expected a finite number, got an integer of "
                             f"{v.bit_length()} bits")
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                or not low <= v <= high:
            raise ValueError(f"{where}: expected a finite number in {low:g}..{high:g}, got "
                             f"{v!r}"[:200])
        return float(v)
    return read


def _int(low: int = 0, high: int = 2**53, none: bool = False) -> Callable:
    def read(v, where):
        if v is None and none:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise ValueError(f"{where}: expected an integer in {low}..{high}, got {v!r}"[:200])
        return v
    return read


def _text(none: bool = False, max_len: int = 100_000) -> Callable:
    def read(v, where):
        if v is None and none:
            return None
        if not isinstance(v, str) or len(v) > max_len:
            raise ValueError(f"{where}: expected text of at most {max_len:,} characters, got "
                             f"{type(v).__name__}")
        return v
    return read


def _object(v, where: str) -> dict:
    if not isinstance(v, dict):
        raise ValueError(f"{where}: expected an object, got {type(v).__name__}")
    return v


def _list(v, where: str, max_len: int) -> list:
    if not isinstance(v, list) or len(v) > max_len:
        raise ValueError(f"{where}: expected a list of at most {max_len:,} items")
    return v


_SECONDS = _num(-1e9, 1e9)
_SOURCES = ("usage", "tokenizer", "chunks")


def _numbers(v, where: str, max_len: int, read=_SECONDS) -> tuple:
    return tuple(read(x, f"{where}[{i}]") for i, x in enumerate(_list(v, where, max_len)))


def read_request(d, where: str, budget: list[int]) -> StreamResult:
    """One request's dict back as a StreamResult; `budget`: chunk times left to read."""
    _object(d, where)
    f = {k: section_field(d, k, where) for k in REQUEST_KEYS}
    out = {
        "index": _int(0, MAX_REQUESTS)(f["index"], f"{where}.index"),
        "scheduled_s": _SECONDS(f["scheduled_s"], f"{where}.scheduled_s"),
        "send_s": _SECONDS(f["send_s"], f"{where}.send_s"),
        "end_s": _SECONDS(f["end_s"], f"{where}.end_s"),
        "chunk_times_s": _numbers(f["chunk_times_s"], f"{where}.chunk_times_s", budget[0]),
    }
    budget[0] -= len(out["chunk_times_s"])
    out["chunk_tokens"] = _numbers(f["chunk_tokens"], f"{where}.chunk_tokens", MAX_CHUNKS,
                                   lambda x, w: _int(1)(x, w))
    if len(out["chunk_tokens"]) != len(out["chunk_times_s"]):
        raise ValueError(f"{where}.chunk_tokens: expected one count per chunk time")
    times = out["chunk_times_s"]
    if any(b < a for a, b in zip(times, times[1:], strict=False)):
        raise ValueError(f"{where}.chunk_times_s: expected non-decreasing times")
    if times and (times[0] < out["send_s"] - 1e-9 or times[-1] > out["end_s"] + 1e-9):
        raise ValueError(f"{where}.chunk_times_s: expected times between send_s and end_s")
    if out["end_s"] < out["send_s"]:
        raise ValueError(f"{where}.end_s: expected end_s >= send_s")
    out["output_tokens"] = _int()(f["output_tokens"], f"{where}.output_tokens")
    source = f["token_source"]
    if source not in _SOURCES:
        raise ValueError(f"{where}.token_source: expected one of {', '.join(_SOURCES)}, got "
                         f"{source!r}"[:200])
    out["token_source"] = source
    out["prompt_tokens"] = _int()(f["prompt_tokens"], f"{where}.prompt_tokens")
    out["requested_tokens"] = _int()(f["requested_tokens"], f"{where}.requested_tokens")
    out["finish_reason"] = _text(True, 100)(f["finish_reason"], f"{where}.finish_reason")
    out["http_status"] = _int(100, 599, True)(f["http_status"], f"{where}.http_status")
    out["error"] = _text(True, 2000)(f["error"], f"{where}.error")
    out["error_kind"] = _text(True, 40)(f["error_kind"], f"{where}.error_kind")
    if (out["error"] is None) != (out["error_kind"] is None):
        raise ValueError(f"{where}.error_kind: expected a kind exactly when there is an error")
    return StreamResult(**out)


def _points(v, where: str, budget: list[int]) -> np.ndarray:
    rows = _list(v, where, budget[0])
    budget[0] -= len(rows)
    out = np.empty((len(rows), 2), dtype=np.float64)
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != 2:
            raise ValueError(f"{where}[{i}]: expected [time_s, value]")
        out[i, 0] = _SECONDS(row[0], f"{where}[{i}][0]")
        out[i, 1] = _num(-math.inf, math.inf)(row[1], f"{where}[{i}][1]")
    if len(out) > 1 and np.any(np.diff(out[:, 0]) < 0):
        raise ValueError(f"{where}: expected times in order")
    return out


def read_scrape(d, where: str) -> ScrapeResult:
    _object(d, where)
    budget = [MAX_POINTS]
    kind = _text(True, 40)(section_field(d, "kind", where), f"{where}.kind")
    scrapes = _int()(section_field(d, "scrapes", where), f"{where}.scrapes")
    notes = _numbers(section_field(d, "notes", where), f"{where}.notes", 100,
                     _text(max_len=2000))
    common_raw = _object(section_field(d, "common", where), f"{where}.common")
    common = {}
    for key, pts in common_raw.items():
        if key not in COMMON:
            raise ValueError(f"{where}.common: unknown series {key[:40]!r}")
        common[key] = _points(pts, f"{where}.common.{key}", budget)
    series_raw = _object(section_field(d, "series", where), f"{where}.series")
    if len(series_raw) > MAX_SERIES:
        raise ValueError(f"{where}.series: more than {MAX_SERIES:,} series")
    series = {name: _points(pts, f"{where}.series[{name[:60]!r}]", budget)
              for name, pts in series_raw.items()}
    return ScrapeResult(series=series, common=common, kind=kind, scrapes=scrapes,
                        notes=notes)


_DIST_KEYS = ("mean", "p50", "p90", "p99", "std")
_METRIC_COUNTS = ("completed", "failed", "total_input_tokens", "total_output_tokens")
_METRIC_RATES = ("duration_s", "request_throughput_per_s", "output_tokens_per_s",
                 "total_tokens_per_s")
LATENCY_KEYS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")


def read_metrics(m, where: str) -> dict:
    """A ServingMetrics.to_dict(), checked field by field (an empty dict: no run)."""
    _object(m, where)
    if not m:
        return {}
    out = dict(m)
    for k in _METRIC_COUNTS:
        out[k] = _int()(section_field(m, k, where), f"{where}.{k}")
    for k in _METRIC_RATES:
        out[k] = _num()(section_field(m, k, where), f"{where}.{k}")
    for k in LATENCY_KEYS:
        d = _object(section_field(m, k, where), f"{where}.{k}")
        out[k] = {p: _num(none=True)(section_field(d, p, f"{where}.{k}"), f"{where}.{k}.{p}")
                  for p in _DIST_KEYS}
    out["goodput_requests_per_s"] = _num(none=True)(
        section_field(m, "goodput_requests_per_s", where), f"{where}.goodput_requests_per_s")
    return out


def _read_agreement(d, where: str) -> dict:
    _object(d, where)
    return {k: _num(none=True)(v, f"{where}.{k}") for k, v in d.items()}


def read_run(d, where: str, metrics: dict) -> EndpointRecord:
    _object(d, where)
    raw = _list(section_field(d, "requests", where), f"{where}.requests", MAX_REQUESTS)
    budget = [MAX_CHUNKS]
    results = tuple(read_request(r, f"{where}.requests[{i}]", budget)
                    for i, r in enumerate(raw))
    failures_raw = _object(section_field(d, "failures", where), f"{where}.failures")
    failures = {str(k)[:40]: _int()(v, f"{where}.failures.{str(k)[:40]}")
                for k, v in failures_raw.items()}
    stopped = section_field(d, "stopped", where)
    if stopped not in (None, "cancelled", "max duration"):
        raise ValueError(f"{where}.stopped: expected null, 'cancelled' or 'max duration', got "
                         f"{stopped!r}"[:200])
    return EndpointRecord(
        results=results, metrics=metrics, failures=failures,
        incomplete=_int()(section_field(d, "incomplete", where), f"{where}.incomplete"),
        not_sent=_int()(section_field(d, "not_sent", where), f"{where}.not_sent"),
        stopped=stopped,
        notes=_numbers(section_field(d, "notes", where), f"{where}.notes", 1000,
                       _text(max_len=2000)),
        scrape=read_scrape(section_field(d, "server_metrics", where),
                           f"{where}.server_metrics"),
        model=_text(True, 1000)(section_field(d, "model", where), f"{where}.model"),
        server_kind=_text(True, 40)(section_field(d, "server_kind", where),
                                    f"{where}.server_kind"),
        agreement=_read_agreement(section_field(d, "agreement", where), f"{where}.agreement"))


SWEEP_POINT_KEYS = {
    "strategy": None, "rate_per_s": _num(), "achieved_requests_per_s": _num(),
    "output_tokens_per_s": _num(), "ttft_p50_s": _num(none=True),
    "ttft_p99_s": _num(none=True), "tpot_p50_s": _num(none=True),
    "tpot_p99_s": _num(none=True), "completed": _int(), "failed": _int(),
    "goodput_requests_per_s": _num(none=True),
}


def read_sweep(d, where: str):
    from inferlab.engines.endpoint.sweep import STRATEGIES, EndpointSweep, EndpointSweepPoint

    _object(d, where)

    def point(p, w):
        _object(p, w)
        values = {}
        for key, read in SWEEP_POINT_KEYS.items():
            v = section_field(p, key, w)
            if read is None:
                if v not in STRATEGIES:
                    raise ValueError(f"{w}.{key}: expected one of {', '.join(STRATEGIES)}, "
                                     f"got {v!r}"[:200])
                values[key] = v
            else:
                values[key] = read(v, f"{w}.{key}")
        return EndpointSweepPoint(**values)

    raw = _list(section_field(d, "points", where), f"{where}.points", 100)
    points = tuple(point(p, f"{where}.points[{i}]") for i, p in enumerate(raw))
    knee_raw = section_field(d, "knee", where)
    knee = None if knee_raw is None else point(knee_raw, f"{where}.knee")
    slo_raw = section_field(d, "slo_s", where)
    slo = None
    if slo_raw is not None:
        _object(slo_raw, f"{where}.slo_s")
        try:
            slo = SLO(**{k: _num(none=True)(slo_raw.get(k), f"{where}.slo_s.{k}")
                         for k in ("ttft_s", "tpot_s", "e2e_s")})
        except ValueError as e:
            if str(e).startswith(where):
                raise
            raise ValueError(f"{where}.slo_s: {e}") from None
    return EndpointSweep(points, knee, slo)


SIDE_COLUMNS = ("endpoint", "engine", "simulated")


def read_side_by_side(d, where: str) -> dict:
    _object(d, where)
    columns = _object(section_field(d, "columns", where), f"{where}.columns")
    out = {"columns": {}, "notes": _numbers(section_field(d, "notes", where), f"{where}.notes",
                                            100, _text(max_len=2000))}
    for key, col in columns.items():
        if key not in SIDE_COLUMNS:
            raise ValueError(f"{where}.columns: unknown column {str(key)[:40]!r}")
        w = f"{where}.columns.{key}"
        _object(col, w)
        out["columns"][key] = {
            "title": _text(max_len=200)(section_field(col, "title", w), f"{w}.title"),
            "metrics": read_metrics(section_field(col, "metrics", w), f"{w}.metrics")}
    return out


def read_endpoint_section(sec: dict):
    """(settings, EndpointRecord or None, EndpointSweep or None, side-by-side dict or None);
    ValueError naming the bad field."""
    settings = check_endpoint_settings(section_field(sec, "settings", WHERE),
                                       f"{WHERE}.settings")
    state = _object(section_field(sec, "state", WHERE), f"{WHERE}.state")
    metrics = read_metrics(section_field(sec, "metrics", WHERE), f"{WHERE}.metrics")
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
    from inferlab.engines.batchlab.timeline import (
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
