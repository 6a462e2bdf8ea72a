"""A published trace as a lab's workload: the `--window START:END` text read (window.py), the
file's requests read (window, time scale, seeded sample: stream.read_trace), those the engine can
run kept (≥ 1 input and ≥ 1 output token), their prompts made from the block ids with the
model's vocabulary (content.py), and the figures a run prints beside its own:

    trace_format              the file's format (given, or read from its first line)
    trace_requests            the requests kept
    trace_requests_empty      those left out (0 input or 0 output tokens)
    trace_hit_rate_unbounded  the ids' own hit rate under an unbounded prefix cache

The cluster lab's `--trace` comes here; the options mean what the batching lab's do
(engines/labs/batching/run.py `trace_items`, the same steps)."""

from __future__ import annotations

from inferlab.engines.serve.traces.content import unbounded_hit_rate, workload_requests
from inferlab.engines.serve.traces.stream import read_trace, trace_format
from inferlab.engines.serve.traces.window import parse_window


def trace_workload(path, format: str | None, window: str | None, time_scale: float,
                   sample: int | None, seed: int, vocab_size: int) -> tuple[list, dict]:
    """(WorkloadRequests, figures) of the trace file (module doc); ValueError when the window
    holds no request."""
    records = list(read_trace(path, format, window=parse_window(window),
                              time_scale=time_scale, sample=sample, seed=seed))
    if not records:
        raise ValueError(f"--trace {path}: the trace holds no request (in the window)")
    kept = [r for r in records if r.input_tokens > 0 and r.output_tokens > 0]
    figures = {"trace_format": trace_format(path, format), "trace_requests": len(kept),
               "trace_requests_empty": len(records) - len(kept),
               "trace_hit_rate_unbounded": unbounded_hit_rate(kept)}
    return workload_requests(kept, vocab_size), figures
