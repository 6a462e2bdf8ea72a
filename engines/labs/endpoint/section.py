"""The snapshot's `labs.endpoint`: `endpoint_section` writes the settings, the run (every
request as the client saw it: send time, chunk arrival times and token counts, output tokens,
error; the scraped /metrics series; the run's notes), the sweep's points and the side-by-side
table when they ran, and the run's metrics (engines/serve/metrics.summarize's dict);
`read_endpoint_section` reads it back strictly into an EndpointSnapshot. No key is in it:
the settings name the environment variable only.
"""

from __future__ import annotations

from inferlab.engines.endpoint.sweep import EndpointSweep
from inferlab.engines.fields import read_object
from inferlab.engines.labs.endpoint.records import (
    EndpointRecord,
    EndpointSnapshot,
    read_run,
    read_side_by_side,
    read_sweep,
    request_dict,
    scrape_dict,
)
from inferlab.engines.labs.endpoint.settings import check_endpoint_settings
from inferlab.engines.serve.metrics import read_serving_metrics
from inferlab.engines.trace.snapshot import lab_section, section_field

WHERE = "labs.endpoint"


def endpoint_section(settings: dict, record: EndpointRecord | None,
                     sweep: EndpointSweep | None = None,
                     side_by_side: dict | None = None) -> dict:
    """The snapshot's `labs.endpoint` (`side_by_side`: side_by_side.compare_engines'
    table)."""
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


def read_endpoint_section(sec: dict) -> EndpointSnapshot:
    """The section read once, strictly: ValueError names the bad field."""
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
    return EndpointSnapshot(settings, record, sweep, side)
