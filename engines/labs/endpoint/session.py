"""What the endpoint lab runs against the user's server: one load run of its settings, the
rate sweep, and the record of a run still in flight. The lab's controller
(app/labs/endpoint.py), `inferlab run endpoint` and `inferlab bench endpoint` all go through
here; the server-facing mechanism is engines/endpoint.

The key is an argument of each call, from the view's masked field or the environment variable
the settings name (`api_key`); nothing here keeps it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from inferlab.engines.endpoint.client import TokenCounter
from inferlab.engines.endpoint.load import EndpointRun, EndpointRunResult, EndpointSettings
from inferlab.engines.endpoint.sweep import EndpointSweep, endpoint_sweep
from inferlab.engines.labs.endpoint.records import EndpointRecord
from inferlab.engines.labs.endpoint.settings import (
    endpoint_requests,
    endpoint_slo,
    endpoint_workload,
    run_settings,
)
from inferlab.engines.serve.metrics import SLO, summarize
from inferlab.engines.serve.workload import Workload


def api_key(var: str) -> str | None:
    """The key in environment variable `var` ("" or None: no key)."""
    if not var:
        return None
    value = os.environ.get(var)
    if not value:
        raise ValueError(f"--api-key-env: the environment variable {var} is not set")
    return value


def load_run(settings: dict, key: str | None, count_tokens: TokenCounter | None = None,
             requests: list | None = None) -> EndpointRun:
    """The load run of `settings` (checked), not started: its requests (`requests`, when the
    caller read them already) read or generated first (ValueError naming the trace file),
    then its runner's settings checked."""
    if requests is None:
        requests = endpoint_requests(settings)
    return EndpointRun(run_settings(settings), requests, api_key=key,
                       count_tokens=count_tokens, slo=endpoint_slo(settings))


def run_endpoint(settings: dict, key: str | None, count_tokens: TokenCounter | None = None,
                 requests: list | None = None) -> EndpointRunResult:
    """One load run of `settings` (checked) to its end. EndpointError (one sentence) when the
    server cannot be used."""
    return load_run(settings, key, count_tokens, requests).run()


def live_record(run: EndpointRun) -> EndpointRecord:
    """The requests `run` has finished so far, in workload order, scored, with its scrapes:
    what the lab's timeline draws while the run goes on."""
    results = tuple(sorted(run.results_so_far(), key=lambda r: r.index))
    metrics = summarize([r.to_timing() for r in results if r.error_kind != "cancelled"])
    return EndpointRecord(results, metrics.to_dict(), scrape=run.scrape_so_far())


@dataclass(frozen=True)
class SweepPlan:
    """The lab's guidellm-style rate sweep (engines/endpoint/sweep.py), its settings checked
    when made (ValueError naming one), run later: synchronous, throughput, then `n_rates`
    constant rates."""

    load: EndpointSettings
    workload: Workload
    slo: SLO
    n_rates: int

    @classmethod
    def of(cls, settings: dict, n_rates: int) -> SweepPlan:
        return cls(run_settings(settings), endpoint_workload(settings), endpoint_slo(settings),
                   n_rates)

    def run(self, key: str | None, progress=None, should_stop=None) -> EndpointSweep:
        return endpoint_sweep(self.load, self.workload, api_key=key, n_rates=self.n_rates,
                              slo=self.slo, progress=progress, should_stop=should_stop)
