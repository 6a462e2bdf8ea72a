"""A published trace as the endpoint's workload: each request at the trace's own arrival time
(× time scale, engines/serve/traces/stream.py), its prompt the text of its block ids
(engines/serve/traces/text.py: requests that share ids share text, and no others), its output
length the trace's (sent as max_tokens with the server's length controls, client.py).

    records  = read_trace(path, format, window=..., time_scale=..., sample=..., seed=...)
    requests, figures = trace_workload(records, path, format)

Requests with no input or no output token are left out (a server cannot run them) and
counted in the figures. `scaled` shrinks a trace's lengths to fit a small model's context
(the fidelity run's SmolLM2, 2048 tokens): input and block size by one factor, so every
request keeps its number of blocks and the trace its sharing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from inferlab.engines.serve.traces.content import unbounded_hit_rate
from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.traces.stream import trace_format
from inferlab.engines.serve.traces.text import prompt_text
from inferlab.engines.serve.workload import WorkloadRequest


def trace_workload(records: Iterable[TraceRequest], path: str | os.PathLike,
                   format: str | None = None) -> tuple[list[WorkloadRequest], dict]:
    """(the workload, the figures a run prints beside its metrics): trace_format,
    trace_requests (those sent: ≥ 1 input and output token), trace_requests_empty (left
    out), trace_hit_rate_unbounded (what an unbounded prefix cache could hit, from the ids).
    The prompt of the i-th request sent is `prompt_text(record, i)`."""
    records = list(records)
    kept = [r for r in records if r.input_tokens > 0 and r.output_tokens > 0]
    requests = [WorkloadRequest(r.arrival_s, r.input_tokens, r.output_tokens,
                                prompt=prompt_text(r, i)) for i, r in enumerate(kept)]
    figures = {"trace_format": trace_format(path, format), "trace_requests": len(kept),
               "trace_requests_empty": len(records) - len(kept),
               "trace_hit_rate_unbounded": unbounded_hit_rate(kept)}
    return requests, figures


def scaled(record: TraceRequest, input_scale: float = 1.0, output_scale: float = 1.0,
           max_input_tokens: int | None = None, max_output_tokens: int | None = None
           ) -> TraceRequest:
    """`record` with shorter lengths:

        input_tokens   min(⌈n · input_scale⌉, max_input_tokens)
        block_size     max(1, round(B · input_scale))   (512 × 1/64 = 8: ⌈n/B⌉ blocks kept)
        output_tokens  min(⌈m · output_scale⌉, max_output_tokens)

    A zero length stays zero (the trace's empty request is still empty)."""
    if not (0 < input_scale <= 1 and 0 < output_scale <= 1):
        raise ValueError(f"length scales must be in (0, 1], got {input_scale!r} and "
                         f"{output_scale!r}")
    n = math.ceil(record.input_tokens * input_scale)
    m = math.ceil(record.output_tokens * output_scale)
    if max_input_tokens is not None:
        n = min(n, max_input_tokens)
    if max_output_tokens is not None:
        m = min(m, max_output_tokens)
    block = max(1, round(record.block_size * input_scale)) if record.block_size else 0
    return record._replace(input_tokens=n, output_tokens=m, block_size=block)
