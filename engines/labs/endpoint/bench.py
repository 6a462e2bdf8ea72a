"""`inferlab bench endpoint [--url URL] --json`: with --url, the guidellm-style sweep
(engines/endpoint/sweep.py) against that server (`bench`); without it, benches of the endpoint
engine that need no real server, each starting the fake one itself.

`client_overhead` answers the issue's goal: how much CPU does the load generator spend per 100
concurrent streams? The fake server runs in its OWN process, so this process's CPU time
(time.process_time: every thread, user + system) is the client's alone: the event loop, httpx,
the SSE decoder, the bookkeeping. Figures are per second of wall time, so "0.12 of a core per
100 streams" means 200 streams kept 24 % of one core busy.

`scrape_agreement`: the client's output tokens/s against the server's own counter, scraped.

`fake_sweep` runs the guidellm-style sweep (sweep.endpoint_sweep) against a fake server, as a
smoke test of the whole path; against a real server, call endpoint_sweep with its URL.

`--fidelity`: the simulated clock against a real llama.cpp server it starts itself, on a
Mooncake-shaped trace window (engines/endpoint/fidelity.py, ~50 s): {"fidelity": figures}.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

from inferlab.engines.endpoint.fidelity import fidelity_figures
from inferlab.engines.endpoint.load import EndpointRun, EndpointSettings, server_agreement
from inferlab.engines.endpoint.sweep import endpoint_sweep
from inferlab.engines.labs.endpoint.run import check_cli_settings
from inferlab.engines.labs.endpoint.session import SweepPlan, api_key
from inferlab.engines.labs.endpoint.settings import ENDPOINT_DEFAULTS
from inferlab.engines.serve.metrics import SLO
from inferlab.engines.serve.workload import LengthDist, Workload, WorkloadRequest


def add_bench_arguments(p) -> None:
    p.add_argument("--url", default=None,
                   help="sweep this server (without it: the client's overhead "
                        "against its own fake server)")
    p.add_argument("--model", default="", help="the model name (default: the "
                                               "server's first)")
    p.add_argument("--api-key-env", default="", metavar="VAR",
                   help="the environment variable holding the API key")
    p.add_argument("--rates", type=int, default=ENDPOINT_DEFAULTS["sweep_rates"],
                   help="constant rates between the synchronous and throughput "
                        "runs (default 3)")
    p.add_argument("--requests", type=int, default=ENDPOINT_DEFAULTS["requests"],
                   help="requests per sweep point (default 16)")
    p.add_argument("--fidelity", action="store_true",
                   help="instead: a trace window against a real llama.cpp server (started "
                        "here on SmolLM2) and through the simulated clock fitted to it; "
                        "per-request TTFT and E2E errors (~50 s)")


def bench(args) -> dict:
    """The sweep's figures against --url, or the client's overhead without it, or with
    --fidelity the simulated clock against a real server."""
    if getattr(args, "fidelity", False):
        return {"fidelity": fidelity_figures()}
    if getattr(args, "url", None) is None:
        return {"client_overhead": client_overhead(), "scrape_agreement": scrape_agreement()}
    settings = check_cli_settings(dict(ENDPOINT_DEFAULTS, url=args.url, model=args.model,
                                       api_key_env=args.api_key_env, sweep_rates=args.rates,
                                       requests=args.requests))
    plan = SweepPlan.of(settings, settings["sweep_rates"])
    return plan.run(api_key(settings["api_key_env"])).to_dict()


@contextlib.contextmanager
def fake_server_process(token_interval_s: float, metrics: bool = False) -> Iterator[str]:
    """A fake server in a child process; yields its URL, stops it after."""
    cmd = [sys.executable, "-m", "inferlab.engines.endpoint.fake_server",
           "--interval", repr(token_interval_s)] + (["--metrics"] if metrics else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError("the fake server process did not start")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def client_overhead(streams: int = 200, rounds: int = 2, output_tokens: int = 100,
                    token_interval_s: float = 0.05) -> dict:
    """`streams` requests kept in flight for `rounds` x `output_tokens` tokens each, paced by
    the server at one token per `token_interval_s`; the client's CPU per 100 streams."""
    requests = [WorkloadRequest(0.0, 16, output_tokens)] * (streams * rounds)
    with fake_server_process(token_interval_s) as url:
        settings = EndpointSettings(url=url, concurrency=streams, scrape_hz=0,
                                    max_duration_s=600)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = EndpointRun(settings, requests).run()
        cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
    chunks = sum(len(r.chunk_times_s) for r in result.results)
    per_core = cpu_s / wall_s if wall_s > 0 else 0.0
    return {
        "streams": streams, "requests": len(requests), "output_tokens": output_tokens,
        "token_interval_s": token_interval_s, "completed": result.metrics.completed,
        "failed": result.metrics.failed, "chunks": chunks, "wall_s": wall_s, "cpu_s": cpu_s,
        "cpu_cores": per_core, "cpu_cores_per_100_streams": per_core * 100 / streams,
        "chunks_per_s": chunks / wall_s if wall_s > 0 else 0.0,
        "cpu_us_per_chunk": cpu_s / chunks * 1e6 if chunks else None,
        "itl_p50_s": result.metrics.itl_s.p50, "itl_p99_s": result.metrics.itl_s.p99,
    }


def scrape_agreement(streams: int = 5, requests: int = 10, output_tokens: int = 40,
                     token_interval_s: float = 0.02, scrape_hz: float = 4.0) -> dict:
    """The client's output tokens/s beside the server's own counter over its scrapes' span
    (load.server_agreement), against the fake server with /metrics: how far the two clocks'
    spans differ (the scrapes hold the run and at most a scrape period either side)."""
    work = [WorkloadRequest(0.0, 16, output_tokens)] * requests
    with fake_server_process(token_interval_s, metrics=True) as url:
        settings = EndpointSettings(url=url, concurrency=streams, scrape_hz=scrape_hz,
                                    max_duration_s=120)
        figures = server_agreement(EndpointRun(settings, work).run())
    client, server = figures["client_output_tokens_per_s"], figures["server_output_tokens_per_s"]
    return figures | {"server_vs_client_output_tokens_per_s":
                      server / client if client and server is not None else None}


def fake_sweep(n_requests: int = 24, output_tokens: int = 16, token_interval_s: float = 0.01,
               n_rates: int = 2, slo: SLO | None = None) -> dict:
    """The sweep against a fake server in its own process (it serves every stream in
    parallel, so the throughput point is bounded by the client and the loopback)."""
    workload = Workload(n_requests=n_requests, prompt_len=LengthDist.fixed(16),
                        output_len=LengthDist.fixed(output_tokens), seed=0)
    with fake_server_process(token_interval_s) as url:
        settings = EndpointSettings(url=url, scrape_hz=0, max_duration_s=120)
        sweep = endpoint_sweep(settings, workload, n_rates=n_rates,
                               slo=slo or SLO(ttft_s=0.5, tpot_s=0.05))
    return sweep.to_dict()
