"""One iteration's records: what the scheduler hands out (`SchedulerOutput`, its
`PrefillChunk`s and `BlockCopy`s), what it takes back from the executor (`SampledTokens`), and
what it builds them from (`Batch`, the iteration being built; `Steady`, what a decode step
that kept every running sequence leaves for the next). `scheduler.py` is what fills them."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from typing import NamedTuple

from inferlab.engines.kv.block_manager import SeqTables
from inferlab.engines.serve.request import Sequence

_new_object = object.__new__
_set_attr = object.__setattr__


class PrefillChunk(NamedTuple):
    """Prompt tokens [start, start + n_tokens) of `seq_id` computed this iteration."""

    seq_id: str
    start: int
    n_tokens: int


class BlockCopy(NamedTuple):
    """Copy-on-write: `seq_id`'s last block `src` was shared, it now owns the fresh block
    `dst`, and K/V block src must be copied to dst before this iteration's forward."""

    seq_id: str
    src: int
    dst: int


@dataclass(frozen=True)
class SchedulerOutput:
    """One iteration's batch. `sample_ids` produce a token this iteration: the decodes and the
    prefills whose last chunk this is. `preempted_for[i]` is the sequence whose reservation
    `preempted[i]` made room for (itself when it preempted itself); `copies` the block copies
    the reservations need, in the order they were made."""

    policy: str
    now_s: float
    prefills: tuple[PrefillChunk, ...]
    decodes: tuple[str, ...]
    preempted: tuple[str, ...]
    sample_ids: tuple[str, ...]
    num_batched_tokens: int
    preempted_for: tuple[str, ...] = ()
    copies: tuple[BlockCopy, ...] = ()
    cached_tokens: Mapping[str, int] | None = None
    """Prompt tokens a prefix hit supplied, per sequence whose (re)prefill started in this
    batch with one (the others: none)."""
    decode_context_tokens: int = 0
    """Σ of the decodes' token counts (their context after this step): the cost model's
    input, kept here so that it need not look every decoding sequence up again."""

    @property
    def seq_ids(self) -> tuple[str, ...]:
        """Every sequence in the batch: decodes first, then prefills."""
        return (*self.decodes, *(c.seq_id for c in self.prefills))

    @property
    def is_empty(self) -> bool:
        return not self.prefills and not self.decodes


class SampledTokens(dict):
    """The tokens an executor sampled for a batch, as `update` takes them (sample id -> token):
    made from the output's `sample_ids` and one python int per id, in that order, which it
    keeps as they are (`tokens`), so that `update` takes them without looking each up and
    making it an int (a plain dict: one lookup and one int() per id). Read-only."""

    __slots__ = ("ids", "tokens")

    def __init__(self, ids: tuple[str, ...], tokens: list[int]) -> None:
        super().__init__(zip(ids, tokens, strict=True))
        self.ids = ids
        self.tokens = tokens

    def _read_only(self, *args, **kwargs):
        raise TypeError("SampledTokens is read-only")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self):  # a copy is a plain dict
        return dict, (dict(self),)


def new_output(**fields) -> SchedulerOutput:
    """`SchedulerOutput(**fields)`, every field given in its order: the frozen dataclass's
    __init__ sets its 11 fields one object.__setattr__ call each (a decode step's largest
    fixed cost); here they are the instance's dict at once."""
    out = _new_object(SchedulerOutput)
    _set_attr(out, "__dict__", fields)
    return out


def context_tokens(seqs: Seq[Sequence]) -> int:
    """The decodes' context after the step: prompt + outputs, every token each reserved."""
    return sum([seq.num_prompt_tokens + len(seq.output_ids) for seq in seqs])


class Steady(NamedTuple):
    """A decode step after which every running sequence decodes again (none finished or
    joined): `update` leaves it for the next `reserve_decodes`, which reserves the same decodes
    without looking at each sequence while the running queue is still `seqs`, in order. The
    step after that is steady too: its `update` need not look for a finish by length while
    `n_left` > 1."""

    seqs: list[Sequence]
    ids: tuple[str, ...]
    tokens: list[int]
    """The tokens each sampled, in order: the ones they feed back next."""
    context_tokens: int
    """The step's decode_context_tokens."""
    n_left: int | None
    """The fewest tokens any of them may still produce (max_new_tokens - outputs), if known."""
    tables: SeqTables | None
    """Their block manager records (`BlockManager.tables`), once a steady step looked them up."""


class Batch:
    """The iteration being built (the sequences beside their ids, for `update`)."""

    __slots__ = ("budget", "steady", "reserved", "n_left", "tables", "steady_ids", "prefills",
                 "decodes", "preempted", "preempted_for", "copies", "cached", "sample_ids",
                 "decode_seqs", "sample_seqs", "num_tokens", "decode_context_tokens")

    def __init__(self, budget: int, steady: Steady | None = None) -> None:
        self.budget = budget
        self.steady = steady  # for reserve_decodes
        self.reserved: int | None = None  # what reserve_decodes reserved, once it ran
        # when the steady decodes were reserved (every running sequence): Steady's n_left,
        # tables (for update) and ids (the output's decodes)
        self.n_left: int | None = None
        self.tables: SeqTables | None = None
        self.steady_ids: tuple[str, ...] | None = None
        self.prefills: list[PrefillChunk] = []
        self.decodes: list[str] = []
        self.preempted: list[str] = []
        self.preempted_for: list[str] = []
        self.copies: list[BlockCopy] = []
        self.cached: dict[str, int] = {}
        self.sample_ids: list[str] = []
        self.decode_seqs: list[Sequence] = []
        self.sample_seqs: list[Sequence] = []
        self.num_tokens = 0
        self.decode_context_tokens = 0

    @property
    def budget_left(self) -> int:
        return self.budget - self.num_tokens

    def add_decodes(self, ids: Seq[str], seqs: Seq[Sequence], context_tokens: int,
                    copies: list[BlockCopy]) -> None:
        """The decodes `reserve_decodes` reserved at once, first in the batch."""
        if copies:
            self.copies += copies
        self.decodes += ids
        self.sample_ids += ids
        self.decode_seqs += seqs
        self.sample_seqs += seqs
        self.num_tokens += len(ids)
        self.decode_context_tokens += context_tokens
        self.reserved = len(ids)

    def decode(self, seq: Sequence) -> None:
        self.decodes.append(seq.seq_id)
        self.sample_ids.append(seq.seq_id)
        self.decode_seqs.append(seq)
        self.sample_seqs.append(seq)
        self.num_tokens += 1
        self.decode_context_tokens += seq.num_tokens

    def prefill(self, seq: Sequence, chunk: PrefillChunk, samples: bool) -> None:
        self.prefills.append(chunk)
        if samples:
            self.sample_ids.append(chunk.seq_id)
            self.sample_seqs.append(seq)
        self.num_tokens += chunk.n_tokens
