"""The endpoint lab's settings: the URL (and more servers, routed), model, API, server kind,
the workload (the batching lab's seeded generator, a JSONL trace, or a published trace:
Mooncake, Bailian, Azure, BurstGPT, ShareGPT, with its window, time scale and sample, as the
batching lab reads it), the pacing (a fixed
concurrency, or the workload's arrival times), SLOs and limits, and the name of the
environment variable holding the API key. The key itself is never a setting: it is in none
of this lab's settings, records, sections or trace events.

`run_settings` makes them the load runner's EndpointSettings (engines/endpoint/load.py);
`run_requests` the run's WorkloadRequests with its trace's figures (`endpoint_requests`
without them).
"""

from __future__ import annotations

from inferlab.engines.endpoint.client import APIS, SERVER_KINDS
from inferlab.engines.endpoint.load import EndpointSettings
from inferlab.engines.endpoint.routing import ROUTERS
from inferlab.engines.endpoint.trace_replay import text_workload
from inferlab.engines.fields import Setting, check_settings, shown
from inferlab.engines.hardware.presets import list_hardware_presets
from inferlab.engines.model.config import list_model_presets
from inferlab.engines.serve import workload
from inferlab.engines.serve.scenarios import lognormal_workload, settings_slo
from inferlab.engines.serve.traces.detect import FORMATS
from inferlab.engines.serve.traces.stream import MAX_SAMPLE, read_trace
from inferlab.engines.serve.traces.window import parse_window

ENDPOINT_DEFAULTS = {
    "url": "http://127.0.0.1:8000",
    "urls": [],                  # more servers (replicas) the load is spread over
    "router": "round-robin",     # how: round-robin, least-tokens, prefix (engines/endpoint/routing)
    "model": "",                 # "": the first model the server lists at /v1/models
    "api": "completions",        # or "chat"
    "server_kind": "auto",
    "api_key_env": "",           # the environment variable holding the key ("": none)
    "workload_file": "",         # a JSONL trace instead of the seeded workload ("": none)
    "trace_file": "",            # a published trace instead ("": none); sent at its times
    "trace_format": "",          # its format ("": read from its first line)
    "trace_window": "",          # START:END seconds after its first arrival ("": all of it)
    "trace_time_scale": 1.0,     # its inter-arrival times multiplied by this
    "trace_sample": 0,           # N of its requests, drawn uniformly with `seed` (0: all)
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
    "trace_file": Setting("str"),
    "trace_format": Setting("str", choices=("", *FORMATS)),
    "trace_window": Setting("str", max_len=100),
    "trace_time_scale": Setting("float", 1e-6, 1e6),
    "trace_sample": Setting("int", 0, MAX_SAMPLE),
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
    if s["trace_window"]:
        try:
            parse_window(s["trace_window"])
        except ValueError:
            raise ValueError(f"{where}.trace_window: expected START:END seconds, got "
                             f"{shown(s['trace_window'], 40)}") from None
    if s["workload_file"] and s["trace_file"]:
        raise ValueError(f"{where}.trace_file: give a workload file or a trace, not both")
    return s


# The settings share the batching lab's workload and SLO fields, so the same builders
# (engines/serve/scenarios.py) read them.
endpoint_slo = settings_slo
endpoint_workload = lognormal_workload


def endpoint_requests(settings: dict) -> list:
    """The run's WorkloadRequests (`run_requests` without the trace's figures)."""
    return run_requests(settings)[0]


def run_requests(settings: dict, progress=None) -> tuple[list, dict]:
    """(the run's WorkloadRequests, the figures of its published trace: {} without one): the
    published trace's (at most `requests`; `published_trace`, `progress` while reading), else
    the workload file's (at most `requests`), else the seeded workload's. ValueError naming
    the file when it cannot be read."""
    if settings["trace_file"]:
        return published_trace(settings, progress)
    path = settings["workload_file"]
    if path:
        return workload.read_trace_requests(path)[: int(settings["requests"])], {}
    return workload.generate(endpoint_workload(settings)), {}


def published_trace(settings: dict, progress=None) -> tuple[list, dict]:
    """The published trace's requests (at most `requests`; engines/endpoint/trace_replay)
    and the figures a run prints beside its metrics (trace_format, trace_requests, ...).
    TraceError naming the file, line and field of a bad row; ValueError for a trace with
    no request in the window. `progress(fraction of the file read, message)` while reading
    (the lab's worker)."""
    s = settings
    path, fmt = s["trace_file"], s["trace_format"] or None

    def read(fraction: float, rows: int) -> None:
        progress(fraction, f"reading the trace: {rows:,} rows")

    records = read_trace(path, fmt, window=parse_window(s["trace_window"] or None),
                         time_scale=float(s["trace_time_scale"]),
                         sample=s["trace_sample"] or None, seed=s["seed"],
                         progress=None if progress is None else read)
    requests, figures = text_workload(records, path, fmt)
    if not requests:
        raise ValueError(f"--trace {path}: the trace holds no request (in the window) with "
                         "an input and an output token")
    if len(requests) > s["requests"]:
        figures["trace_requests_cut"] = len(requests) - s["requests"]
    return requests[: int(s["requests"])], figures


def run_settings(settings: dict, **overrides) -> EndpointSettings:
    """The load runner's EndpointSettings for the lab's settings (no key: it is passed
    apart, to EndpointRun)."""
    s = settings
    fields = dict(
        url=s["url"], urls=tuple(s["urls"]), router=s["router"],
        model=s["model"] or None, api=s["api"], server_kind=s["server_kind"],
        concurrency=s["concurrency"] or None, max_in_flight=s["max_in_flight"],
        max_requests=s["requests"], max_duration_s=float(s["max_duration_s"]),
        read_timeout_s=float(s["read_timeout_s"]),
        request_timeout_s=float(s["request_timeout_s"]), scrape_hz=float(s["scrape_hz"]))
    return EndpointSettings(**(fields | overrides)).checked()
