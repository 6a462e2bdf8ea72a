"""A published trace as the batching lab's workload: its requests (at most `limit`, in arrival
order) as the engine's, prompts made from the block ids with the run's model's vocabulary, and
the figures a run prints beside its metrics. `run batching --trace` and the lab's Trace tab
("Run the lab on this trace") both read a trace through here."""

from __future__ import annotations

import itertools

from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.traces.content import unbounded_hit_rate, workload_requests
from inferlab.engines.serve.traces.stream import read_trace, trace_format


def trace_vocabulary(settings: dict, device: str) -> tuple[int, object | None]:
    """(vocabulary size prompts are drawn from, tokenizer ShareGPT's text is counted with):
    the simulated model's size and no tokenizer (none ships for a preset: the estimate), or
    the real model's own."""
    if settings["clock"] == "simulated":
        return load_model_preset(settings["model_config"]).vocab_size, None
    model, tokenizer = load_lab_model(settings["model"], device)
    return model.config.vocab_size, tokenizer


def trace_workload(path, settings: dict, device: str = "cpu", fmt: str | None = None, *,
                   window=None, time_scale: float = 1.0, sample: int | None = None,
                   seed: int = 0, limit: int | None = None,
                   progress=None) -> tuple[list, dict]:
    """(WorkloadRequests, figures): trace_format, trace_requests (those with ≥ 1 input and
    output token: the engine runs no other), trace_requests_empty (left out),
    trace_hit_rate_unbounded. `progress(fraction, message)` while the file is read."""
    fmt = trace_format(path, fmt)
    vocab_size, tokenizer = trace_vocabulary(settings, device)

    def read(fraction: float, rows: int) -> None:
        progress(fraction, f"reading the trace: {rows:,} rows")

    records = read_trace(path, fmt, window=window, time_scale=time_scale, sample=sample,
                         seed=seed, progress=None if progress is None else read,
                         tokenizer=tokenizer)
    records = list(records if limit is None else itertools.islice(records, limit))
    if not records:
        raise ValueError(f"{path}: the trace holds no request (in the window)")
    kept = [r for r in records if r.input_tokens > 0 and r.output_tokens > 0]
    if not kept:
        raise ValueError(f"{path}: no request of the trace has both an input and an output "
                         "token")
    figures = {"trace_format": fmt, "trace_requests": len(kept),
               "trace_requests_empty": len(records) - len(kept),
               "trace_hit_rate_unbounded": unbounded_hit_rate(kept)}
    return workload_requests(kept, vocab_size), figures
