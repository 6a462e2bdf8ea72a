"""A published trace as a lab's workload: the `--window START:END` text read (window.py), the
file's requests read (window, time scale, seeded sample: stream.read_trace; at most `limit`, in
arrival order), those the engine can run kept (≥ 1 input and ≥ 1 output token), their prompts
made from the block ids with the model's vocabulary (content.py), and the figures a run prints
beside its own (`trace_figures`, which the endpoint's text prompts use too):

    trace_format              the file's format (given, or read from its first line)
    trace_requests            the requests kept
    trace_requests_empty      those left out (0 input or 0 output tokens)
    trace_hit_rate_unbounded  the ids' own hit rate under an unbounded prefix cache

The batching lab's `--trace` and Trace tab and the cluster lab's `--trace` come here."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence

from inferlab.engines.serve.traces.content import unbounded_hit_rate, workload_requests
from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.traces.scale import scaled
from inferlab.engines.serve.traces.stream import read_trace, trace_format
from inferlab.engines.serve.traces.window import parse_window


def trace_figures(records: Sequence[TraceRequest], kept: Sequence[TraceRequest],
                  path: str | os.PathLike, format: str | None) -> dict:
    """The figures above, of the `records` read and the `kept` ones."""
    return {"trace_format": trace_format(path, format), "trace_requests": len(kept),
            "trace_requests_empty": len(records) - len(kept),
            "trace_hit_rate_unbounded": unbounded_hit_rate(kept)}


def runnable(records: Sequence[TraceRequest]) -> list[TraceRequest]:
    """The requests an engine or server can run: ≥ 1 input and ≥ 1 output token."""
    return [r for r in records if r.input_tokens > 0 and r.output_tokens > 0]


def read_runnable(path, format: str | None, window: str | None, time_scale: float,
                  sample: int | None, seed: int, *, limit: int | None = None,
                  progress: Callable[[float, str], None] | None = None, tokenizer=None,
                  length_scale: float = 1.0) -> tuple[list[TraceRequest], list[TraceRequest]]:
    """(the requests read, those an engine can run) of the trace file (module doc), lengths
    and block size × `length_scale` (scale.py); ValueError when the window holds none the
    engine can run. `progress(fraction, message)` while reading; `tokenizer` counts
    ShareGPT's text (stream.read_trace)."""
    def read(fraction: float, rows: int) -> None:
        progress(fraction, f"reading the trace: {rows:,} rows")

    records = read_trace(path, format, window=parse_window(window), time_scale=time_scale,
                         sample=sample, seed=seed, tokenizer=tokenizer,
                         progress=None if progress is None else read)
    records = list(records if limit is None else itertools.islice(records, limit))
    if not records:
        raise ValueError(f"--trace {path}: the trace holds no request (in the window)")
    if length_scale != 1.0:
        records = [scaled(r, length_scale, length_scale) for r in records]
    kept = runnable(records)
    if not kept:
        raise ValueError(f"--trace {path}: no request in the window has both an input and "
                         "an output token")
    return records, kept


def trace_workload(path, format: str | None, window: str | None, time_scale: float,
                   sample: int | None, seed: int, vocab_size: int, *, limit: int | None = None,
                   progress: Callable[[float, str], None] | None = None,
                   tokenizer=None) -> tuple[list, dict]:
    """(WorkloadRequests, figures) of the trace file (`read_runnable`)."""
    records, kept = read_runnable(path, format, window, time_scale, sample, seed, limit=limit,
                                  progress=progress, tokenizer=tokenizer)
    return workload_requests(kept, vocab_size), trace_figures(records, kept, path, format)
