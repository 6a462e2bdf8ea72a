"""Hash ids become content: each block id is a fixed block of token ids, so requests that
share ids share tokens exactly, and the prefix caches see the trace's own sharing.

    block_tokens(id, B, V)   B token ids in 0..V-1, a counter-based stream keyed by the id
                             (splitmix64: seed = mix(id), token j = mix(seed + (j+1)·γ) mod V,
                             γ = 0x9E3779B97F4A7C15): the same id gives the same block in every
                             request and run, and a request's missing blocks are drawn in one
                             numpy call
    prompt of a request      its blocks' tokens in order, cut at input_tokens; positions past
                             the blocks the trace lists come from the request's own stream
                             (seed mix(mix(index) xor TAIL_TAG)), shared with nobody

A prompt is a TokenIds joined from its blocks (each checked once, when it is drawn; nothing
walks the prompt again) that keeps them as its parts, so that the hash prefix cache chains a
shared block's keys once (TokenIds.block_chain). Blocks are kept, most recently used last,
up to BLOCK_CACHE of them.

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
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np

from inferlab.engines.serve.token_ids import TokenIds
from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.workload import WorkloadError, WorkloadRequest

TAIL_TAG = 0x7A11_B10C
"""Mixed into a request's own seed, so its tail never repeats a block id's draw."""
BLOCK_CACHE = 65_536
"""Blocks of content kept for the requests that share them (most recently used kept)."""
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MASK64 = 2**64 - 1
_blocks: OrderedDict[tuple[int, int, int], TokenIds] = OrderedDict()


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _streams(seeds: Sequence[int], n_tokens: int, vocab_size: int) -> list[TokenIds]:
    """One TokenIds of n_tokens ids below vocab_size per (already mixed) seed."""
    # uint64 arrays wrap silently (numpy warns on overflow for scalars only)
    steps = np.arange(1, n_tokens + 1, dtype=np.uint64) * _GAMMA
    z = _mix(np.asarray(seeds, dtype=np.uint64)[:, None] + steps[None, :])
    v = np.uint64(vocab_size)
    tokens = (z - z // v * v).astype(np.intp)  # z mod v: numpy divides by one number faster
    tops = tokens.max(axis=1).tolist() if n_tokens else [-1] * len(seeds)
    rows = _token_ints(vocab_size)[tokens].tolist()
    return [TokenIds.trusted(tuple(row), top) for row, top in zip(rows, tops, strict=True)]


@functools.lru_cache(maxsize=4)
def _token_ints(vocab_size: int) -> np.ndarray:
    """The ints 0..vocab_size-1 as one object array: a drawn block's ids are these very
    objects (numpy indexing copies references), not an int made per id; a trace's
    prompts hold tens of millions of ids, which then cost a pointer each, and the hash
    cache's keys and hashes read them from this one small table."""
    return np.arange(vocab_size).astype(object)


def _seeds(keys: Iterable[int]) -> list[int]:
    return _mix(np.asarray([k & _MASK64 for k in keys], dtype=np.uint64)).tolist()


def block_parts(block_ids: Sequence[int], block_size: int, vocab_size: int
                ) -> list[TokenIds]:
    """The content of each of `block_ids` (module doc), the missing ones drawn at once."""
    got: dict[int, TokenIds] = {}
    missing = []
    for block_id in block_ids:
        key = (block_id, block_size, vocab_size)
        part = _blocks.get(key)
        if part is None:
            missing.append(block_id)
        else:
            _blocks.move_to_end(key)
            got[block_id] = part
    if missing:
        missing = list(dict.fromkeys(missing))
        for block_id, part in zip(missing, _streams(_seeds(missing), block_size, vocab_size),
                                  strict=True):
            got[block_id] = _blocks[(block_id, block_size, vocab_size)] = part
        while len(_blocks) > BLOCK_CACHE:
            _blocks.popitem(last=False)
    return [got[b] for b in block_ids]


def block_tokens(block_id: int, block_size: int, vocab_size: int) -> TokenIds:
    """The block_size token ids (each < vocab_size) that block `block_id` stands for."""
    return block_parts((block_id,), block_size, vocab_size)[0]


def clear_block_cache() -> None:
    """Forget every block drawn so far (they are drawn again, the same, when asked for)."""
    _blocks.clear()


def prompt_token_ids(record: TraceRequest, vocab_size: int, index: int) -> TokenIds:
    """Request `index`'s prompt: its blocks' tokens cut at input_tokens; past its blocks,
    tokens of its own (seeded by TAIL_TAG and index)."""
    n, bs = record.input_tokens, record.block_size
    used = record.block_hashes[: -(-n // bs)] if bs else ()
    parts = block_parts(used, bs, vocab_size) if used else []
    have = len(used) * bs
    if have < n:
        seed = _mix(np.asarray(_seeds((index,)), dtype=np.uint64) ^ np.uint64(TAIL_TAG))
        parts += _streams(seed.tolist(), n - have, vocab_size)
    return TokenIds.join(parts, n)


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
