"""`inferlab run endpoint`: load a real OpenAI-compatible server headless.

    inferlab run endpoint --url URL [--model NAME] [--workload FILE | --requests N --rate R |
                          --concurrency C] [--api-key-env VAR] [--max-seconds S]
                          [--side-by-side] --snapshot F [--json]
    inferlab run endpoint --url URL --trace F [--trace-format FMT] [--window A:B]
                          [--time-scale X] [--sample N] ...

`run` probes the server (one clear sentence and no snapshot when it cannot be used: not
http(s), unreachable, a refused key, not OpenAI-compatible), runs the workload, and returns
(section, summary): the metrics and per request ttft_s, e2e_s, output_tokens, chunk_times_s
(each chunk's arrival, seconds after the request was sent: the first is ttft_s, the last
e2e_s) and error (None when it succeeded). The key is read from the environment variable
named by --api-key-env and goes nowhere but the server. `inferlab bench endpoint` is bench.py.

`--trace F` replays a published trace (the batching lab's options, the same meanings): each
request sent at its arrival time × --time-scale, its prompt the text of its block ids
(engines/endpoint/trace_replay.py), all the window's requests unless --requests caps them;
the summary adds trace_format, trace_requests, trace_requests_empty and
trace_hit_rate_unbounded beside the metrics.
"""

from __future__ import annotations

from inferlab.engines.endpoint.client import APIS, SERVER_KINDS
from inferlab.engines.endpoint.routing import ROUTERS
from inferlab.engines.endpoint.url import api_root
from inferlab.engines.fields import option_error
from inferlab.engines.labs.endpoint.records import EndpointRecord
from inferlab.engines.labs.endpoint.section import endpoint_section
from inferlab.engines.labs.endpoint.session import api_key, run_endpoint
from inferlab.engines.labs.endpoint.settings import (
    ENDPOINT_DEFAULTS,
    ENDPOINT_SETTINGS,
    check_endpoint_settings,
    run_requests,
)
from inferlab.engines.labs.endpoint.side_by_side import compare_engines
from inferlab.engines.labs.endpoint.trace import endpoint_trace
from inferlab.engines.model.registry import MODEL_NAMES
from inferlab.engines.serve.traces.detect import FORMATS

OPTIONS = {"url": "--url", "urls": "--url", "router": "--router", "model": "--model",
           "requests": "--requests", "rate_per_s": "--rate", "concurrency": "--concurrency",
           "seed": "--seed", "max_duration_s": "--max-seconds", "slo_ttft_s": "--slo-ttft",
           "slo_tpot_s": "--slo-tpot", "scrape_hz": "--scrape-hz",
           "api_key_env": "--api-key-env", "engine_model": "--engine-model",
           "workload_file": "--workload", "sweep_rates": "--rates", "trace_file": "--trace",
           "trace_format": "--trace-format", "trace_window": "--window",
           "trace_time_scale": "--time-scale", "trace_sample": "--sample"}


def _common(p, url_required: bool) -> None:
    d = ENDPOINT_DEFAULTS
    p.add_argument("--url", required=url_required, default=None, nargs="+", metavar="URL",
                   help="the server's root, e.g. http://127.0.0.1:8000 (only it is "
                        "contacted); several: replicas the load is spread over (--router)")
    p.add_argument("--router", default=d["router"], choices=ROUTERS,
                   help="with several --url: round-robin, least-tokens (fewest outstanding "
                        "tokens) or prefix (the server sent the longest prefix of the prompt) "
                        f"(default {d['router']})")
    p.add_argument("--model", default="", help="the model name (default: the first the "
                                               "server lists at /v1/models)")
    p.add_argument("--api", default=d["api"], choices=tuple(APIS),
                   help="completions or chat completions (default completions)")
    p.add_argument("--server-kind", default=d["server_kind"], choices=("auto", *SERVER_KINDS),
                   help="which length controls to send (default: guessed from /v1/models)")
    p.add_argument("--api-key-env", default="", metavar="VAR",
                   help="the environment variable holding the API key (sent as a bearer "
                        "token to --url only, never recorded)")
    p.add_argument("--requests", type=int, default=None,
                   help=f"requests in the seeded workload (default {d['requests']}); the most "
                        "a --workload or --trace sends (default: a --trace's all)")
    p.add_argument("--seed", type=int, default=d["seed"], help="workload seed (default 0)")


def add_arguments(p) -> None:
    d = ENDPOINT_DEFAULTS
    _common(p, url_required=True)
    p.add_argument("--workload", default="", metavar="FILE.jsonl",
                   help="a JSONL trace (arrival_s, prompt_tokens, output_tokens per line) "
                        "instead of the seeded workload")
    p.add_argument("--trace", default="", metavar="FILE",
                   help="a published trace (Mooncake, Bailian, Azure, BurstGPT, ShareGPT or "
                        "InferLab JSONL; the format read from its first line) sent at its "
                        "arrival times; block hash ids become shared prompt text")
    p.add_argument("--trace-format", default="", choices=("", *FORMATS),
                   help="the --trace file's format, when its first line should not decide")
    p.add_argument("--window", default="", metavar="START:END",
                   help="only the --trace requests from START to END seconds after its first "
                        "arrival")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="--trace inter-arrival times multiplied by this (default 1)")
    p.add_argument("--sample", type=int, default=0, metavar="N",
                   help="N of the --trace requests, drawn uniformly with --seed (default all)")
    p.add_argument("--rate", type=float, default=None,
                   help="Poisson arrivals at this many requests/s (instead of --concurrency)")
    p.add_argument("--concurrency", type=int, default=None,
                   help=f"keep this many requests in flight (default {d['concurrency']}; "
                        "a trace or --rate follows its arrival times)")
    p.add_argument("--max-seconds", type=float, default=d["max_duration_s"],
                   help=f"stop the run after this long (default {d['max_duration_s']:g} s)")
    p.add_argument("--slo-ttft", type=float, default=d["slo_ttft_s"],
                   help=f"goodput's TTFT objective, s (default {d['slo_ttft_s']:g})")
    p.add_argument("--slo-tpot", type=float, default=d["slo_tpot_s"],
                   help=f"goodput's TPOT objective, s (default {d['slo_tpot_s']:g})")
    p.add_argument("--scrape-hz", type=float, default=d["scrape_hz"],
                   help="polls of /metrics per second, 1-4, or 0 for none (default 2)")
    p.add_argument("--side-by-side", action="store_true",
                   help="also run the same requests through the in-app engine (wall clock) "
                        "and the simulated GPU: one metrics table")
    p.add_argument("--engine-model", default=d["engine_model"],
                   help=f"the side-by-side in-app engine's model: {', '.join(MODEL_NAMES)} or a "
                        f"path (default {d['engine_model']})")


def check_cli_settings(settings: dict) -> dict:
    """The settings checked, a bad one named by its option (ValueError)."""
    try:
        return check_endpoint_settings(settings, "settings")
    except ValueError as e:
        raise option_error(e, OPTIONS) from None


def settings_of(args) -> dict:
    """The lab's settings from the command line, checked; ValueError names the option."""
    if args.rate is not None and args.concurrency is not None:
        raise ValueError("give --rate (arrivals) or --concurrency (in flight), not both")
    trace = getattr(args, "trace", "")
    paced = args.rate is not None or ((args.workload or trace) and args.concurrency is None)
    requests = args.requests
    if requests is None:
        requests = (int(ENDPOINT_SETTINGS["requests"].high) if trace
                    else ENDPOINT_DEFAULTS["requests"])
    s = dict(ENDPOINT_DEFAULTS, url=args.url[0], urls=list(args.url[1:]),
             router=args.router, model=args.model, api=args.api,
             server_kind=args.server_kind, api_key_env=args.api_key_env,
             workload_file=args.workload, requests=requests, seed=args.seed,
             trace_file=trace, trace_format=getattr(args, "trace_format", ""),
             trace_window=getattr(args, "window", ""),
             trace_time_scale=getattr(args, "time_scale", 1.0),
             trace_sample=getattr(args, "sample", 0),
             max_duration_s=args.max_seconds, slo_ttft_s=args.slo_ttft,
             slo_tpot_s=args.slo_tpot, scrape_hz=args.scrape_hz,
             engine_model=args.engine_model)
    if args.rate is not None:
        s["rate_per_s"] = args.rate
    s["concurrency"] = 0 if paced else (args.concurrency if args.concurrency is not None
                                        else ENDPOINT_DEFAULTS["concurrency"])
    if args.concurrency is not None and args.concurrency < 1:
        raise ValueError(f"--concurrency: expected an integer >= 1, got {args.concurrency}")
    return check_cli_settings(s)


def request_summary(r) -> dict:
    return {"index": r.index, "server": r.server, "ttft_s": r.ttft_s, "e2e_s": r.e2e_s,
            "output_tokens": r.output_tokens, "chunk_times_s": [t - r.send_s for t in
                                                                r.chunk_times_s],
            "error": r.error}


def run(args, recorder):
    """Run the workload against --url; (section, summary)."""
    settings = settings_of(args)
    api_root(settings["url"])  # a bad URL is said before anything else
    key = api_key(settings["api_key_env"])
    requests, figures = run_requests(settings)
    offset = recorder.now_s()
    with recorder.span("endpoint run", cat="endpoint", args={"url": settings["url"]}):
        result = run_endpoint(settings, key, requests=requests)
    record = EndpointRecord.of(result)
    endpoint_trace(recorder, record, offset)
    side = None
    if args.side_by_side:
        with recorder.span("side by side: in-app engine and simulated GPU", cat="endpoint"):
            side = compare_engines(settings, record)
    section = endpoint_section(settings, record, side_by_side=side)
    summary = dict(section["metrics"], **figures, model=record.model,
                   server_kind=record.server_kind,
                   failures=record.failures, incomplete=record.incomplete,
                   stopped=record.stopped, notes=list(record.notes),
                   server_metrics=record.scrape_note(), agreement=record.agreement,
                   servers=[{"url": url, "scrapes": scrape.scrapes, "kind": scrape.kind}
                            for url, scrape in record.servers],
                   requests=[request_summary(r) for r in record.results])
    if side is not None:
        summary["side_by_side"] = side_by_side_rows(side)
    return section, summary


def side_by_side_rows(side: dict) -> list[dict]:
    """One line per column of the side-by-side table (the headline figures)."""
    rows = []
    for col in side["columns"].values():
        m = col["metrics"]
        rows.append({"engine": col["title"], "completed": m["completed"],
                     "ttft_p50_s": m["ttft_s"]["p50"], "ttft_p99_s": m["ttft_s"]["p99"],
                     "tpot_p50_s": m["tpot_s"]["p50"], "e2e_p50_s": m["e2e_s"]["p50"],
                     "output_tokens_per_s": m["output_tokens_per_s"]})
    return rows

