"""A published trace as the endpoint's workload: each request at the trace's own arrival time
(× time scale, engines/serve/traces/stream.py), its prompt the text of its block ids
(engines/serve/traces/text.py: requests that share ids share text, and no others), its output
length the trace's (sent as max_tokens with the server's length controls, client.py).

    records  = read_trace(path, format, window=..., time_scale=..., sample=..., seed=...)
    requests, figures = text_workload(records, path, format)

Requests with no input or no output token are left out (a server cannot run them) and
counted in the figures. `scaled` (serve/traces/scale.py) shrinks a trace's lengths to fit a
small model's context (the fidelity run's SmolLM2, 2048 tokens).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.traces.replay import runnable, trace_figures
from inferlab.engines.serve.traces.text import prompt_text
from inferlab.engines.serve.workload import WorkloadRequest


def text_workload(records: Iterable[TraceRequest], path: str | os.PathLike,
                   format: str | None = None) -> tuple[list[WorkloadRequest], dict]:
    """(the workload, the figures a run prints beside its metrics): trace_format,
    trace_requests (those sent: ≥ 1 input and output token), trace_requests_empty (left
    out), trace_hit_rate_unbounded (what an unbounded prefix cache could hit, from the ids).
    The prompt of the i-th request sent is `prompt_text(record, i)`."""
    records = list(records)
    kept = runnable(records)
    requests = [WorkloadRequest(r.arrival_s, r.input_tokens, r.output_tokens,
                                prompt=prompt_text(r, i)) for i, r in enumerate(kept)]
    figures = trace_figures(records, kept, path, format)
    return requests, figures
