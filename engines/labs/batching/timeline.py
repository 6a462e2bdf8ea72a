"""The batch timeline as arrays: what state each request was in, over what span of the run's clock.

`timeline_segments` turns the lab's records into a Gantt chart's data, one segment per run of
one request in one state (row = the request's place in arrival order):

    WAITING    arrival -> first scheduled; and, while its prefill is in progress, the iterations
               between two chunks it was left out of
    PREFILL    iterations in which it had a prefill chunk (a recompute's re-prefill included)
    DECODE     iterations in which it fed one token back
    PREEMPTED  from the iteration that preempted it (recompute) to its next scheduling
    STALLED    running, past its prefill, but left out of an iteration's batch (a prefill-only
               iteration of the no-chunking policy makes every decode stall)

Consecutive iterations in the same state merge into one segment ([start of the first, end of the
last], covering the time between them), so 20,000 decodes of one request are ONE segment. Between
adjacent iterations in different states the small gap between them stays empty. A gap segment
spans [end of the last iteration it ran in, start of the next]. A finished request shows nothing
after its last token: a static batch's bubble is its other rows going on while no new row starts.
A run cut short ends every unfinished row at the last iteration's end.

Linear in the records: a Python pass reads the batches into runs (TimelineBuilder, which also
extends a live timeline with only the new records), numpy does the rest.
`iteration_strips` gives the per-iteration series drawn under the Gantt chart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inferlab.engines.serve.records import IterationRecord, PrefillSlice, RequestInfo

WAITING = 0
PREFILL = 1
DECODE = 2
PREEMPTED = 3
STALLED = 4
STATE_NAMES = {WAITING: "waiting", PREFILL: "prefill", DECODE: "decode",
               PREEMPTED: "preempted", STALLED: "stalled"}


@dataclass(frozen=True, eq=False)
class TimelineSegments:
    """Segments sorted by (row, start_s); rows are request indices in arrival order."""

    row: np.ndarray  # int32
    state: np.ndarray  # uint8, one of the state codes above
    start_s: np.ndarray  # float64, on the run's clock
    end_s: np.ndarray  # float64
    request_ids: tuple[str, ...]  # request_ids[row]
    row_of: dict  # request id -> row

    def __len__(self) -> int:
        return int(self.row.shape[0])

    def rows(self) -> list[tuple[int, int, float, float]]:
        """(row, state, start_s, end_s) per segment: for tests and debugging."""
        columns = (self.row, self.state, self.start_s, self.end_s)
        return [(int(r), int(s), float(a), float(b)) for r, s, a, b in zip(*columns, strict=True)]


@dataclass(frozen=True, eq=False)
class IterationStrips:
    """One value per iteration, in record order (preemptions: requests preempted in it)."""

    start_s: np.ndarray
    end_s: np.ndarray
    batch_size: np.ndarray  # int32
    prefill_tokens: np.ndarray  # int64
    decode_tokens: np.ndarray  # int64
    kv_usage: np.ndarray  # float64, used / total blocks in [0, 1]
    preemptions: np.ndarray  # int32
    cached_tokens: np.ndarray  # int64: prompt tokens prefix hits supplied to its prefills
    evicted_blocks: np.ndarray  # int32: cached prefix blocks eviction gave up in it


def arrival_order(requests: Sequence[RequestInfo]) -> list[int]:
    """Indices of `requests` by arrival time, ties in submission order: row -> index."""
    return sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)


def timeline_segments(requests: Sequence[RequestInfo],
                      iterations: Sequence[IterationRecord]) -> TimelineSegments:
    """Every request's states over the run (see the module docstring). ValueError if an
    iteration names a request that is not in `requests`."""
    builder = TimelineBuilder(requests)
    builder.extend(iterations)
    return builder.segments()


class GrowingColumns:
    """Columns of one length that grow by appending rows: each a preallocated numpy array
    whose capacity doubles when full (appending k rows costs O(k), amortised); a column is a
    view of the rows so far, no copy."""

    def __init__(self, dtypes: dict[str, np.dtype], capacity: int = 1024) -> None:
        self.n = 0
        self._data = {name: np.empty(capacity, dtype) for name, dtype in dtypes.items()}

    def append(self, columns: dict[str, np.ndarray]) -> None:
        k = len(next(iter(columns.values()))) if columns else 0
        end = self.n + k
        capacity = len(next(iter(self._data.values())))
        if end > capacity:
            capacity = max(end, 2 * capacity)
            for name, old in self._data.items():
                grown = np.empty(capacity, old.dtype)
                grown[: self.n] = old[: self.n]
                self._data[name] = grown
        for name, column in self._data.items():
            column[self.n: end] = columns[name]
        self.n = end

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[name][: self.n]


_Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # row, state, start, end


class TimelineBuilder:
    """`timeline_segments`, built as the iterations come: `extend(new_records)` reads only
    the new ones (a Python pass over their batches) into per-request RUNS (consecutive
    iterations in one state), and `segments()` assembles the segments with numpy. A finished
    request's segments never change again (nothing after its finish is drawn), so they are
    assembled once and kept; each call assembles the unfinished requests' only and merges
    the two. A live timeline costs the new records plus the unfinished requests, not the
    run's length."""

    def __init__(self, requests: Sequence[RequestInfo]) -> None:
        order = arrival_order(requests)
        self.request_ids = tuple(requests[i].request_id for i in order)
        self.row_of = {rid: row for row, rid in enumerate(self.request_ids)}
        if len(self.row_of) != len(self.request_ids):
            raise ValueError("request ids must be unique")
        self._arrival = np.array([requests[i].arrival_s for i in order], dtype=np.float64)
        self._prompt = [requests[i].prompt_tokens for i in order]
        self._times = GrowingColumns({"t0": np.dtype(np.float64), "t1": np.dtype(np.float64)})
        # each row's closed runs, and its open run: [state, first k, last k, done after it]
        self._closed: dict[int, list[tuple[int, int, int, bool]]] = {}
        self._open: dict[int, list] = {}
        self._preempted: dict[int, list[int]] = {}  # row -> iterations that preempted it
        self._finished: set[int] = set()
        self.n_iterations = 0
        self._kept_rows: set[int] = set()  # finished rows whose segments are kept
        self._kept_mask = np.zeros(len(self.request_ids), bool)  # the same, by row
        self._to_keep: set[int] = set()  # finished rows not kept yet
        self._kept = _no_segments()  # their segments, sorted by (row, start)

    def _refuse(self, it: IterationRecord) -> None:
        """ValueError naming the first request of `it` that is not in the requests."""
        for where, rids in (("a prefill", [p.request_id for p in it.prefills]),
                            ("a decode", it.decodes), ("a preemption", it.preempted),
                            ("a finish", it.finished)):
            for rid in rids:
                if rid not in self.row_of:
                    raise ValueError(f"{where} names request {rid!r}, not in the requests")

    def extend(self, iterations: Sequence[IterationRecord]) -> None:
        row_of, prompt, open_runs = self.row_of, self._prompt, self._open
        t0: list[float] = []
        t1: list[float] = []
        try:
            for it in iterations:
                k = self.n_iterations
                try:  # row -> (state, past its prefill); a prefill in the same one wins
                    entries = {row_of[rid]: (DECODE, True) for rid in it.decodes}
                    for p in it.prefills:
                        row = row_of[p.request_id]
                        entries[row] = (PREFILL, p.start + p.n_tokens >= prompt[row])
                    preempted = [row_of[rid] for rid in it.preempted]
                    finished = [row_of[rid] for rid in it.finished]
                except KeyError:
                    self._refuse(it)
                    raise
                kept = self._kept_rows
                if kept and not (kept.isdisjoint(entries) and kept.isdisjoint(preempted)
                                 and kept.isdisjoint(finished)):
                    # a record after a finish (not from our schedulers): assemble all again
                    self._kept_rows, self._kept = set(), _no_segments()
                    self._kept_mask[:] = False
                    self._to_keep = set(self._finished)
                for row, (state, done) in entries.items():
                    run = open_runs.get(row)
                    if run is not None and run[0] == state and run[2] == k - 1:
                        run[2], run[3] = k, done
                        continue
                    if run is not None:
                        self._closed.setdefault(row, []).append(tuple(run))
                    open_runs[row] = [state, k, k, done]
                for row in preempted:
                    self._preempted.setdefault(row, []).append(k)
                self._finished.update(finished)
                self._to_keep.update(finished)
                t0.append(it.start_s)
                t1.append(it.end_s)
                self.n_iterations += 1
        finally:
            self._times.append({"t0": np.array(t0, np.float64), "t1": np.array(t1, np.float64)})

    def segments(self) -> TimelineSegments:
        n_rows, n_iter = len(self.request_ids), self.n_iterations
        if n_rows == 0 or n_iter == 0:
            return TimelineSegments(*_no_segments(), self.request_ids, self.row_of)
        # finished and scheduled rows not kept yet: assembled once, merged into the kept
        done = sorted(r for r in self._to_keep - self._kept_rows if r in self._open)
        if done:
            self._kept = _merge_rows(self._kept, self._assemble(np.array(done, np.int64)))
            self._kept_rows.update(done)
            self._kept_mask[done] = True
        self._to_keep.difference_update(done)  # a finished row never scheduled stays live
        live = self._assemble(np.flatnonzero(~self._kept_mask))
        return TimelineSegments(*_merge_rows(self._kept, live), self.request_ids, self.row_of)

    def _assemble(self, rows: np.ndarray) -> _Columns:
        """The segments of `rows` (ascending), sorted by (row, start_s)."""
        n_iter = self.n_iterations
        t0, t1, arrival = self._times["t0"], self._times["t1"], self._arrival
        runs = [(row, *run) for row in rows.tolist() for run in self._closed.get(row, ())]
        runs += [(row, *self._open[row]) for row in rows.tolist() if row in self._open]
        r = np.array(runs, dtype=np.int64).reshape(len(runs), 5)
        r = r[np.lexsort((r[:, 2], r[:, 0]))]  # by row, then first iteration
        r_row, r_state, r_k0, r_k1, r_done = r[:, 0], r[:, 1], r[:, 2], r[:, 3], r[:, 4] == 1
        n_r = r_row.size
        same_row_next = np.zeros(n_r, bool)
        same_row_next[:-1] = r_row[1:] == r_row[:-1]
        first = np.ones(n_r, bool)
        first[1:] = ~same_row_next[:-1]
        last = ~same_row_next
        seg = [(r_row, r_state, t0[r_k0], t1[r_k1])]

        # leading waits: arrival -> first scheduled; rows never scheduled wait to the end
        f_row, f_k = r_row[first], r_k0[first]
        seg.append((f_row, np.full(f_row.size, WAITING), arrival[f_row], t0[f_k]))
        never_rows = np.setdiff1d(rows, f_row, assume_unique=True)
        seg.append((never_rows, np.full(never_rows.size, WAITING), arrival[never_rows],
                    np.full(never_rows.size, t1[-1])))

        # gaps between two runs of a request (adjacent runs in different states leave the
        # small gap between their iterations empty), and after the last run if unfinished
        inner = np.flatnonzero(same_row_next)
        inner = inner[r_k0[inner + 1] > r_k1[inner] + 1]
        finished = np.array([row in self._finished for row in r_row[last].tolist()], bool)
        tail = np.flatnonzero(last)[~finished]
        tail = tail[r_k1[tail] < n_iter - 1]
        g_row = np.concatenate([r_row[inner], r_row[tail]])
        g_a = np.concatenate([r_k1[inner], r_k1[tail]])  # the iteration it last ran in
        g_b = np.concatenate([r_k0[inner + 1], np.full(tail.size, n_iter)])  # next (n_iter: none)
        g_end = np.concatenate([t0[r_k0[inner + 1]], np.full(tail.size, t1[-1])])
        # left out while its prefill is in progress: waiting; past it: stalled. An inner gap
        # without a preemption is mid-prefill when a chunk follows it.
        prev = np.concatenate([inner, tail])
        left_out = np.where(r_done[prev], STALLED, WAITING)
        g_state = left_out.copy()
        g_state[: inner.size] = np.where(r_state[inner + 1] == PREFILL, WAITING, STALLED)
        # the first preemption p with a <= p < b, if any
        stride = n_iter + 1
        p_key = np.sort(np.array([row * stride + k for row in rows.tolist()
                                  for k in self._preempted.get(row, ())], np.int64))
        if p_key.size:
            pos = np.searchsorted(p_key, g_row * stride + g_a, side="left")
            candidate = p_key[np.minimum(pos, p_key.size - 1)]
            hit = (pos < p_key.size) & (candidate < g_row * stride + g_b)
            p_at = candidate % stride
        else:
            hit, p_at = np.zeros(g_row.size, bool), np.zeros(g_row.size, np.int64)
        plain = ~hit
        seg.append((g_row[plain], g_state[plain], t1[g_a[plain]], g_end[plain]))
        # preempted: left out for a while first (p > a + 1), then preempted until rescheduled
        pre = hit & (p_at > g_a + 1)
        seg.append((g_row[pre], left_out[pre], t1[g_a[pre]], t0[p_at[pre]]))
        p_start = np.where(p_at > g_a, t0[np.minimum(p_at, n_iter - 1)], t1[g_a])
        seg.append((g_row[hit], np.full(int(hit.sum()), PREEMPTED), p_start[hit], g_end[hit]))

        row = np.concatenate([s[0] for s in seg]).astype(np.int32)
        state = np.concatenate([s[1] for s in seg]).astype(np.uint8)
        start = np.concatenate([s[2] for s in seg]).astype(np.float64)
        end = np.concatenate([s[3] for s in seg]).astype(np.float64)
        scheduled = np.zeros(row.size, bool)
        scheduled[:n_r] = True
        keep = scheduled | (end > start)  # empty waits (scheduled on arrival) are dropped
        row, state, start, end = row[keep], state[keep], start[keep], end[keep]
        order_rs = np.lexsort((start, row))
        return row[order_rs], state[order_rs], start[order_rs], end[order_rs]


def _no_segments() -> _Columns:
    empty = np.zeros(0, np.float64)
    return np.zeros(0, np.int32), np.zeros(0, np.uint8), empty, empty.copy()


def _merge_rows(a: _Columns, b: _Columns) -> _Columns:
    """Two sets of segments, each sorted by (row, start_s), of disjoint rows: one, sorted."""
    at = np.searchsorted(a[0], b[0], side="left")
    return tuple(np.insert(x, at, y) for x, y in zip(a, b, strict=True))


def segment_at(segments: TimelineSegments, row: int, t_s: float) -> int | None:
    """Index of the segment of `row` that contains time `t_s` (binary search), or None."""
    lo, hi = np.searchsorted(segments.row, [row, row + 1])
    if lo == hi:
        return None
    i = int(lo + np.searchsorted(segments.start_s[lo:hi], t_s, side="right")) - 1
    if i < lo or t_s > segments.end_s[i]:
        return None
    return i


def cached_tokens_by_request(iterations: Sequence[IterationRecord]) -> dict[str, int]:
    """Prompt tokens a prefix hit supplied to each request at its first scheduling (vLLM's
    num_cached_tokens; a recompute's own hits are not counted again)."""
    out: dict[str, int] = {}
    for it in iterations:
        for p in it.prefills:
            out.setdefault(p.request_id, p.cached)
    return out


def prefix_hit_spans(segments: TimelineSegments, cached: dict[str, int],
                     prompt_tokens: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the Gantt marks a prefix hit: (row, start_s, end_s) per request whose first
    prefill `cached` tokens of its `prompt_tokens` skipped, over the first part of its first
    prefill segment, as long as that segment times the share of the prompt that was cached."""
    rows, starts, ends = [], [], []
    hits = [(rid, n) for rid, n in cached.items() if n > 0]  # most requests: none
    if not hits:
        return np.zeros(0, np.int32), np.zeros(0, np.float64), np.zeros(0, np.float64)
    is_prefill = np.flatnonzero(segments.state == PREFILL)
    first_rows, first = np.unique(segments.row[is_prefill], return_index=True)
    first_of_row = dict(zip(first_rows.tolist(), is_prefill[first].tolist(), strict=True))
    for rid, n_cached in hits:
        row = segments.row_of.get(rid)
        i = first_of_row.get(row)
        total = prompt_tokens.get(rid, 0)
        if i is None or total <= 0:
            continue
        a, b = float(segments.start_s[i]), float(segments.end_s[i])
        rows.append(row)
        starts.append(a)
        ends.append(a + (b - a) * min(n_cached / total, 1.0))
    return (np.array(rows, dtype=np.int32), np.array(starts, dtype=np.float64),
            np.array(ends, dtype=np.float64))


class RunningHitRate:
    """The batching metric prefix_hit_rate of the requests scheduled so far, after each
    iteration: Σ cached prompt tokens / Σ prompt tokens, each request counted at its first
    prefill chunk (as cached_tokens_by_request); 0 before any. `extend` takes the next
    iterations (a live run's redraw costs the new records only)."""

    def __init__(self, requests: Sequence[RequestInfo]) -> None:
        self._prompt_tokens = {r.request_id: r.prompt_tokens for r in requests}
        self._seen: set[str] = set()
        self.cached_tokens = self.prompt_tokens = 0

    def extend(self, iterations: Sequence[IterationRecord]) -> np.ndarray:
        out = np.zeros(len(iterations), dtype=np.float64)
        for i, it in enumerate(iterations):
            for p in it.prefills:
                if p.request_id not in self._seen and p.request_id in self._prompt_tokens:
                    self._seen.add(p.request_id)
                    self.cached_tokens += p.cached
                    self.prompt_tokens += self._prompt_tokens[p.request_id]
            out[i] = self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
        return out


def running_prefix_hit_rate(requests: Sequence[RequestInfo],
                            iterations: Sequence[IterationRecord]) -> np.ndarray:
    """RunningHitRate over a whole run."""
    return RunningHitRate(requests).extend(iterations)


def iteration_strips(iterations: Sequence[IterationRecord]) -> IterationStrips:
    """The per-iteration series under the timeline, in record order."""
    n = len(iterations)
    data = np.array([(it.start_s, it.end_s, it.batch_size, it.prefill_tokens, it.decode_tokens,
                      it.kv_usage, len(it.preempted), sum(p.cached for p in it.prefills),
                      it.evicted_blocks)
                     for it in iterations], dtype=np.float64).reshape(n, 9)
    return IterationStrips(
        start_s=data[:, 0].copy(), end_s=data[:, 1].copy(),
        batch_size=data[:, 2].astype(np.int32), prefill_tokens=data[:, 3].astype(np.int64),
        decode_tokens=data[:, 4].astype(np.int64), kv_usage=data[:, 5].copy(),
        preemptions=data[:, 6].astype(np.int32), cached_tokens=data[:, 7].astype(np.int64),
        evicted_blocks=data[:, 8].astype(np.int32))


# ---- a synthetic schedule, for benchmarks and the view's pictures (not a scheduler) ----------
def synthetic_schedule(n_requests: int = 60, *, max_iterations: int = 100_000,
                       max_running: int = 16, token_budget: int = 512, kv_blocks: int = 160,
                       block_size: int = 16, mean_gap_s: float = 0.05, mean_new_tokens: float = 60.0,
                       seed: int = 0,
                       ) -> tuple[list[RequestInfo], list[IterationRecord]]:
    """A continuous-batching-like run on a simulated clock: staggered (Poisson) arrivals,
    prefills chunked to the token budget, decodes first, and the newest running request
    preempted (recompute) when the KV pool has no block for a decode. Iteration time is
    5 ms + 20 µs per token. Deterministic for a seed; cheap enough for 20,000 iterations."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(mean_gap_s, n_requests))
    prompts = np.clip(rng.lognormal(5.0, 0.8, n_requests), 8, 4 * token_budget).astype(int)
    sigma = 0.7
    outputs = np.clip(rng.lognormal(math.log(mean_new_tokens) - sigma**2 / 2, sigma, n_requests),
                      2, 8 * mean_new_tokens).astype(int)
    requests = [RequestInfo(f"r{i:04d}", float(arrivals[i]), int(prompts[i]), int(outputs[i]))
                for i in range(n_requests)]
    waiting: list[int] = []
    running: list[int] = []  # admission order; the last is preempted first
    computed = [0] * n_requests  # prefill tokens done
    target = [int(p) for p in prompts]  # tokens to prefill (prompt + outputs after a recompute)
    made = [0] * n_requests  # output tokens
    blocks = [0] * n_requests
    used = 0
    next_arrival, now, iterations = 0, 0.0, []
    while len(iterations) < max_iterations:
        while next_arrival < n_requests and arrivals[next_arrival] <= now:
            waiting.append(next_arrival)
            next_arrival += 1
        if not waiting and not running:
            if next_arrival >= n_requests:
                break
            now = float(arrivals[next_arrival])
            continue
        budget, prefills, decodes, preempted = token_budget, [], [], []
        for i in list(running):
            if i not in running or not budget:
                continue
            if computed[i] < target[i]:
                n = min(target[i] - computed[i], budget)
                prefills.append(PrefillSlice(requests[i].request_id, computed[i], n))
                budget -= n
                continue
            need = math.ceil((prompts[i] + made[i] + 1) / block_size)  # after this token
            while need > blocks[i] and used + need - blocks[i] > kv_blocks:
                victim = running.pop()
                used -= blocks[victim]
                blocks[victim], computed[victim] = 0, 0
                target[victim] = int(prompts[victim]) + made[victim]
                waiting.insert(0, victim)
                preempted.append(requests[victim].request_id)
                if victim == i:
                    break
            if i not in running:
                continue
            used += need - blocks[i]
            blocks[i] = need
            decodes.append(requests[i].request_id)
            budget -= 1
        while not preempted and waiting and budget and len(running) < max_running:
            i = waiting[0]
            need = math.ceil(target[i] / block_size)
            if used + need > kv_blocks:
                break
            waiting.pop(0)
            running.append(i)
            used += need
            blocks[i] = need
            n = min(target[i] - computed[i], budget)
            prefills.append(PrefillSlice(requests[i].request_id, computed[i], n))
            budget -= n
        tokens = token_budget - budget
        start, now = now, now + 0.005 + 20e-6 * tokens
        finished = []
        for p in prefills:
            i = int(p.request_id[1:])
            computed[i] += p.n_tokens
            if computed[i] == target[i]:
                made[i] += 1
        for rid in decodes:
            made[int(rid[1:])] += 1
        for i in list(running):
            if made[i] >= outputs[i]:
                running.remove(i)
                used -= blocks[i]
                blocks[i] = 0
                finished.append(requests[i].request_id)
        iterations.append(IterationRecord(
            index=len(iterations), policy="continuous", clock="simulated", start_s=start,
            end_s=now, prefills=tuple(prefills), decodes=tuple(decodes),
            preempted=tuple(preempted), finished=tuple(finished), kv_used_blocks=used,
            kv_total_blocks=kv_blocks, waiting=len(waiting), running=len(running)))
    return requests, iterations
