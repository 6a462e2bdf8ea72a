"""The same requests, side by side: the endpoint, the in-app continuous engine on this
machine's wall clock, and the simulated GPU, one metrics table.

Request for request: each request the client sent goes to the in-app engines at the time the
client sent it (relative to the first send), with the prompt tokens the server counted and
the output tokens it returned (what the workload asked, for a failed request). Both engines
are the batching lab's (engines/labs/batching: `run_policy` over `batching_session`), policy
continuous with chunked prefill; every column is scored by engines/serve/metrics.summarize
with the same SLOs. The wall-clock engine keeps its limits (the first 32 requests, prompts
clipped to 64 tokens, outputs to 32): the table says so when they cut the workload.
"""

from __future__ import annotations

from collections.abc import Callable

from inferlab.engines.hardware.cancel import check_stop
from inferlab.engines.labs.batching.compare import run_policy
from inferlab.engines.labs.batching.session import (
    WALL_MAX_OUTPUT,
    WALL_MAX_PROMPT,
    WALL_MAX_REQUESTS,
)
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.serve.workload import WorkloadRequest

TITLES = {"endpoint": "Endpoint (client side)", "engine": "In-app engine (wall clock)",
          "simulated": "Simulated GPU"}


def replayed_requests(results) -> list[WorkloadRequest]:
    """The requests the client sent, as a workload: arrival = send time - the first send;
    cancelled requests (never finished) are left out."""
    sent = [r for r in results if r.error_kind != "cancelled"]
    if not sent:
        return []
    t0 = min(r.send_s for r in sent)
    out = []
    for r in sorted(sent, key=lambda r: r.send_s):
        n_out = r.output_tokens if r.ok and r.output_tokens > 0 else r.requested_tokens
        out.append(WorkloadRequest(arrival_s=max(0.0, r.send_s - t0),
                                   prompt_tokens=max(1, r.prompt_tokens),
                                   output_tokens=max(1, n_out)))
    return out


def compare_engines(settings: dict, record, device: str = "cpu",
                    progress: Callable[[float, str], None] | None = None,
                    should_stop: Callable[[], bool] | None = None) -> dict:
    """{"columns": {"endpoint"|"engine"|"simulated": {"title", "metrics"}}, "notes": [...]}
    for the endpoint run `record` (section.EndpointRecord) and the lab's `settings`."""
    report = progress or (lambda fraction, message: None)
    items = replayed_requests(record.results)
    if not items:
        raise ValueError("the endpoint run sent no request to compare with")
    base = dict(BATCHING_DEFAULTS, policy="continuous", requests=len(items),
                slo_ttft_s=settings["slo_ttft_s"], slo_tpot_s=settings["slo_tpot_s"])
    columns = {"endpoint": {"title": TITLES["endpoint"], "metrics": dict(record.metrics)}}
    notes = []
    report(0.05, f"the in-app engine ({settings['engine_model']}, wall clock)")
    check_stop(should_stop)
    wall = run_policy(dict(base, clock="wall", model=settings["engine_model"]), items, device,
                      should_stop)
    columns["engine"] = {"title": f"In-app engine ({settings['engine_model']}, wall clock)",
                         "metrics": wall.metrics}
    cut = (len(items) > WALL_MAX_REQUESTS
           or any(w.prompt_tokens > WALL_MAX_PROMPT or w.output_tokens > WALL_MAX_OUTPUT
                  for w in items[:WALL_MAX_REQUESTS]))
    if cut:
        notes.append(f"the in-app engine ran at most {WALL_MAX_REQUESTS} requests, prompts "
                     f"clipped to {WALL_MAX_PROMPT} tokens and outputs to {WALL_MAX_OUTPUT} "
                     "(wall clock on this machine)")
    report(0.6, f"the simulated GPU ({settings['model_config']} on {settings['hardware']})")
    check_stop(should_stop)
    sim = run_policy(dict(base, clock="simulated", model_config=settings["model_config"],
                          hardware=settings["hardware"]), items, device, should_stop)
    columns["simulated"] = {"title": f"Simulated {settings['hardware']} "
                                     f"({settings['model_config']})", "metrics": sim.metrics}
    notes.append("each request reached the in-app engines when the client sent it to the "
                 "endpoint, with the tokens the server counted; policy continuous, chunked")
    report(1.0, "compared")
    return {"columns": columns, "notes": notes}
