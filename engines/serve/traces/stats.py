"""What a trace holds, in one pass over its requests and bounded memory: the record the trace
view draws.

    arrivals_per_bin[k]    requests with k·bin_s ≤ arrival_s < (k+1)·bin_s; bin_s is 1 s
                           until the trace spans MAX_ARRIVAL_BINS seconds, then doubles (pairs
                           of bins merged) as often as it must
    input_hist[k]          requests whose input length n has n.bit_length() == k: bin 0 is
    output_hist[k]         n = 0, bin k ≥ 1 is 2^(k-1) ≤ n < 2^k (log-spaced, one per octave;
                           edges from `length_bin_edges`)
    reuse_hist[k]          block ids shared by c requests, c.bit_length() == k (bin 1: ids one
                           request lists; bin 2: 2-3 requests; bin 3: 4-7 ...); a request
                           listing an id twice counts once
    turns_hist[t]          sessions holding t requests (t ≥ 1; index 0 is always 0); requests
                           with no session are in no session

Memory: one int per arrival bin (at most MAX_ARRIVAL_BINS), one per distinct block id and
one per session, each up to MAX_TRACKED (ids and sessions past it are counted in
`blocks_untracked` / `sessions_untracked` and left out of the histograms), whatever the
number of rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from inferlab.engines.serve.traces.record import TraceRequest

MAX_ARRIVAL_BINS = 100_000
MAX_TRACKED = 2_000_000
"""Distinct block ids (and sessions) counted one by one: ~200 MB of dict at most."""


def length_bin_edges(n_bins: int) -> tuple[int, ...]:
    """The n_bins + 1 edges of a log2 histogram: 0, 1, 2, 4, ... (bin k is [edge k, edge k+1))."""
    return (0,) + tuple(1 << k for k in range(n_bins))


@dataclass(frozen=True)
class TraceStats:
    """A trace's statistics (module doc). Tuples of counts; totals in tokens and seconds."""

    requests: int
    requests_empty: int  # with 0 input or 0 output tokens
    duration_s: float  # the last arrival, from the first
    input_tokens: int
    output_tokens: int
    bin_s: float
    arrivals_per_bin: tuple[int, ...]
    input_hist: tuple[int, ...]
    output_hist: tuple[int, ...]
    block_size: int  # tokens per hashed block (0: the trace names none)
    blocks: int  # distinct block ids
    block_refs: int  # Σ distinct ids per request
    reuse_hist: tuple[int, ...]
    sessions: int
    turns_hist: tuple[int, ...]
    blocks_untracked: int = 0
    sessions_untracked: int = 0

    @property
    def arrivals_per_s(self) -> tuple[float, ...]:
        """Each bin's arrivals over its width: requests per second."""
        return tuple(c / self.bin_s for c in self.arrivals_per_bin)

    @property
    def mean_rate_per_s(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def shared_block_refs(self) -> int:
        """References to a block some other request also lists."""
        return self.block_refs - self.reuse_hist[1] if len(self.reuse_hist) > 1 else 0


class TraceStatsCounter:
    """Adds requests one at a time (`add`); `result()` is the TraceStats so far."""

    def __init__(self):
        self.requests = self.requests_empty = 0
        self.input_tokens = self.output_tokens = 0
        self.last_s = 0.0
        self.bin_s = 1.0
        self.arrivals: list[int] = []
        self.input_hist: list[int] = []
        self.output_hist: list[int] = []
        self.block_size = 0
        self.block_counts: dict[int, int] = {}
        self.block_refs = self.blocks_untracked = 0
        self.session_counts: dict[int, int] = {}
        self.sessions_untracked = 0

    def add(self, r: TraceRequest) -> None:
        self.requests += 1
        if r.input_tokens == 0 or r.output_tokens == 0:
            self.requests_empty += 1
        self.input_tokens += r.input_tokens
        self.output_tokens += r.output_tokens
        self.last_s = max(self.last_s, r.arrival_s)
        k = int(max(r.arrival_s, 0.0) // self.bin_s)
        while k >= MAX_ARRIVAL_BINS:
            self._coarsen()
            k = int(max(r.arrival_s, 0.0) // self.bin_s)
        if k >= len(self.arrivals):
            self.arrivals.extend([0] * (k + 1 - len(self.arrivals)))
        self.arrivals[k] += 1
        _count(self.input_hist, r.input_tokens.bit_length())
        _count(self.output_hist, r.output_tokens.bit_length())
        if r.block_hashes:
            self.block_size = self.block_size or r.block_size
            ids = r.block_hashes if len(set(r.block_hashes)) == len(r.block_hashes) else set(
                r.block_hashes)
            counts = self.block_counts
            for block_id in ids:
                self.block_refs += 1
                c = counts.get(block_id)
                if c is not None:
                    counts[block_id] = c + 1
                elif len(counts) < MAX_TRACKED:
                    counts[block_id] = 1
                else:
                    self.blocks_untracked += 1
        if r.session is not None:
            c = self.session_counts.get(r.session)
            if c is not None:
                self.session_counts[r.session] = c + 1
            elif len(self.session_counts) < MAX_TRACKED:
                self.session_counts[r.session] = 1
            else:
                self.sessions_untracked += 1

    def _coarsen(self) -> None:
        a = self.arrivals + [0] * (len(self.arrivals) % 2)
        self.arrivals = [a[i] + a[i + 1] for i in range(0, len(a), 2)]
        self.bin_s *= 2

    def result(self) -> TraceStats:
        reuse: list[int] = []
        for c in self.block_counts.values():
            _count(reuse, c.bit_length())
        turns: list[int] = [0]
        for c in self.session_counts.values():
            _count(turns, c)
        return TraceStats(
            requests=self.requests, requests_empty=self.requests_empty,
            duration_s=self.last_s, input_tokens=self.input_tokens,
            output_tokens=self.output_tokens, bin_s=self.bin_s,
            arrivals_per_bin=tuple(self.arrivals), input_hist=tuple(self.input_hist),
            output_hist=tuple(self.output_hist), block_size=self.block_size,
            blocks=len(self.block_counts), block_refs=self.block_refs,
            reuse_hist=tuple(reuse), sessions=len(self.session_counts),
            turns_hist=tuple(turns) if len(turns) > 1 else (),
            blocks_untracked=self.blocks_untracked,
            sessions_untracked=self.sessions_untracked)


def _count(hist: list[int], k: int) -> None:
    if k >= len(hist):
        hist.extend([0] * (k + 1 - len(hist)))
    hist[k] += 1


def trace_stats(records: Iterable[TraceRequest], progress=None, every: int = 50_000
                ) -> TraceStats:
    """The TraceStats of `records` (a stream: read_trace's), one pass; `progress(n)` after
    every `every` requests when given."""
    counter = TraceStatsCounter()
    for i, r in enumerate(records, start=1):
        counter.add(r)
        if progress is not None and i % every == 0:
            progress(i)
    return counter.result()
