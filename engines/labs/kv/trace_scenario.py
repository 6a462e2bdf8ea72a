"""A published trace as a KV lab scenario: its requests on the real model and the paged pool,
the trace's own prefix sharing in the blocks.

The KV lab counts steps, not seconds: a request arrives at step ⌊arrival_s / step_s⌋ (step_s:
the wall time one step stands for; SmolLM2's decode step is some tens of ms on a laptop CPU).
Its prompt is its block ids' content (serve/traces/content.py) drawn from the model's own
vocabulary, so requests that share ids share whole blocks of tokens and no others; its output
length is the trace's, generated greedily (a real model may stop earlier at its end token).
Production prompts (Mooncake's are thousands of tokens) are shrunk for a small model on a CPU
by `length_scale` (serve/traces/scale.py: inputs, outputs and the trace's block size together,
so each request keeps its number of blocks and the trace its sharing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inferlab.engines.labs.kv.scenarios import (
    PreparedRequest,
    PreparedScenario,
    RequestSpec,
    Scenario,
    pool_size,
)
from inferlab.engines.serve.traces.content import prompt_token_ids
from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.traces.replay import read_runnable, trace_figures

STEP_S = 0.05
"""Seconds of the trace one lab step stands for, by default."""

TRACE_SCENARIO = "trace"


def read_kv_trace(trace: dict, progress=None) -> tuple[dict, list[TraceRequest], dict]:
    """(the setting with the format the file was read as, the requests a model can run, the
    figures) of a checked `trace` setting (settings.py): its window, time scale, seeded
    sample, lengths × length_scale (`run kv --trace` and the lab's Trace… both read so).
    `progress(fraction of the file, message)` as `read_runnable`'s."""
    records, kept = read_runnable(trace["path"], trace["format"], trace["window"],
                                  trace["time_scale"], trace["sample"], trace["seed"],
                                  progress=progress, length_scale=trace["length_scale"])
    figures = trace_figures(records, kept, trace["path"], trace["format"])
    return dict(trace, format=figures["trace_format"]), kept, figures


def trace_scenario(records: Sequence[TraceRequest], name: str, vocab_size: int,
                   block_size: int = 16, n_blocks: int | None = None,
                   step_s: float = STEP_S) -> PreparedScenario:
    """The runnable `records` (≥ 1 input and output token) as a PreparedScenario named after
    the trace `name`; the pool sized as a built-in scenario's (`pool_size`) unless `n_blocks`."""
    if not (0 < step_s < math.inf):
        raise ValueError(f"step_s must be a finite number of seconds > 0, got {step_s!r}")
    if block_size < 1:
        raise ValueError(f"block size must be at least 1 token, got {block_size}")
    requests = []
    for i, r in enumerate(records):
        if r.input_tokens < 1 or r.output_tokens < 1:
            continue
        ids = r.token_ids if r.token_ids is not None else prompt_token_ids(r, vocab_size, i)
        spec = RequestSpec(f"t{i}", "", r.output_tokens, int(r.arrival_s // step_s))
        requests.append(PreparedRequest(spec, tuple(ids)))
    if not requests:
        raise ValueError(f"{name}: no request with both an input and an output token")
    n_blocks, max_seq_len = pool_size([(p.spec, p.prompt_ids) for p in requests], block_size,
                                      n_blocks)
    scenario = Scenario(TRACE_SCENARIO, name,
                        f"{len(requests)} requests of {name}, one step per {step_s:g} s of the "
                        "trace, prompts made from its block ids",
                        tuple(p.spec for p in requests))
    return PreparedScenario(scenario, tuple(requests), block_size, n_blocks, max_seq_len)
