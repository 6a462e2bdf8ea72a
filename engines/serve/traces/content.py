"""Hash ids become content: each block id is a fixed block of token ids, so requests that
share ids share tokens exactly, and the prefix caches see the trace's own sharing.

    block_tokens(id, B, V)   B token ids in 0..V-1 drawn by numpy's Generator seeded by the id:
                             the same id gives the same block in every request and run
    prompt of a request      its blocks' tokens in order, cut at input_tokens; positions past
                             the blocks the trace lists come from the request's own seed
                             (TAIL_TAG, index), shared with nobody

Different ids give different blocks unless B draws from V all agree (probability V^-B: nil
for a real vocabulary). `unbounded_hit_rate` is what an unbounded cache would hit, from the
ids alone:

    hit_i = min(run_i · B, input_i)    run_i: the longest k such that an earlier request began
                                       with the same first k ids
    rate  = Σ hit_i / Σ input_i

A real pool hits whole blocks only and never the prompt's last token, so it reaches this
figure exactly when no request's run covers its last, partial or full, block.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import numpy as np

from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.workload import WorkloadError, WorkloadRequest

TAIL_TAG = 0x7A11_B10C
"""Mixed into a request's own seed, so its tail never repeats a block id's draw."""


@functools.lru_cache(maxsize=65_536)
def block_tokens(block_id: int, block_size: int, vocab_size: int) -> tuple[int, ...]:
    """The block_size token ids (each < vocab_size) that block `block_id` stands for."""
    rng = np.random.default_rng(block_id)
    return tuple(rng.integers(0, vocab_size, size=block_size).tolist())


def prompt_token_ids(record: TraceRequest, vocab_size: int, index: int) -> tuple[int, ...]:
    """Request `index`'s prompt: its blocks' tokens cut at input_tokens; past its blocks,
    tokens of its own (seeded by TAIL_TAG and index)."""
    n, bs = record.input_tokens, record.block_size
    ids: list[int] = []
    for block_id in record.block_hashes:
        if len(ids) >= n:
            break
        ids.extend(block_tokens(block_id, bs, vocab_size))
    if len(ids) < n:
        rng = np.random.default_rng([TAIL_TAG, index])
        ids.extend(rng.integers(0, vocab_size, size=n - len(ids)).tolist())
    return tuple(ids[:n])


def workload_request(record: TraceRequest, vocab_size: int, index: int) -> WorkloadRequest:
    """The engine's request for `record` (the `index`-th of its run), prompt ids given: the
    trace's own, or its blocks' content. WorkloadError for a request with no prompt or no
    output, which the engine cannot run."""
    if record.input_tokens < 1 or record.output_tokens < 1:
        raise WorkloadError(f"request {index}: {record.input_tokens} input and "
                            f"{record.output_tokens} output tokens; a run needs at least 1 "
                            "of each")
    ids = record.token_ids if record.token_ids is not None else prompt_token_ids(
        record, vocab_size, index)
    return WorkloadRequest(record.arrival_s, len(ids), record.output_tokens,
                           prompt_token_ids=ids)


def workload_requests(records: Iterable[TraceRequest], vocab_size: int
                      ) -> list[WorkloadRequest]:
    """`workload_request` of each record, in order."""
    return [workload_request(r, vocab_size, i) for i, r in enumerate(records)]


def unbounded_hit_rate(records: Iterable[TraceRequest]) -> float:
    """Σ min(run_i · block_size, input_i) / Σ input_i, in arrival order (module doc); 0.0
    for a trace of no input tokens.

    "Seen" is per chain, as a prefix cache keys blocks: request i's first k ids count when an
    earlier request began with the same k ids (of the same block size). Mooncake's and
    Bailian's ids already name their whole prefix, so for them this is "each id seen
    before"; for made-up ids it is what a cache could actually hit."""
    seen: set[int] = set()
    hit = total = 0
    for r in records:
        key, run, matching = hash(("blocks", r.block_size)), 0, True
        for block_id in r.block_hashes:
            key = hash((key, block_id))
            if matching and key in seen:
                run += 1
            else:
                matching = False
                seen.add(key)
        hit += min(run * r.block_size, r.input_tokens)
        total += r.input_tokens
    return hit / total if total else 0.0
