"""The batching policies a `Scheduler` runs, one small class each, and the two orders in which
it admits waiting requests.

A policy chooses each iteration's batch: its `schedule(sched, now_s)` walks the scheduler's
live queues (`sched.running_seqs`, oldest admission first; `sched.waiting_seqs`, the next
admitted first) and builds `sched.batch` through the scheduler's reservation steps
(`reserve_decode`, `reserve_prefill`, `preempt`, `admit`, `order_waiting`), which do the
block bookkeeping. Its flags say what the scheduler must refuse or forbid under it:
`splits_prefill` (a prompt over the token budget can still run), `preempts` (a preempted
sequence re-prefills prompt + outputs) and `can_fork` (parallel sampling may add sequences).
`steady_decodes` says that when nothing waits and every running sequence decodes, its batch
starts with `reserve_decodes` and is those decodes if that reserves them all: the scheduler
may then reserve them without running the policy (a decode step's common case).

    Continuous   "continuous"              vLLM v1, chunked prefill
    NoChunking   "continuous-no-chunking"  vLLM v0's default, prefill-first
    Static       "static"                  a fixed batch until its last member finishes
    Fcfs         "fcfs"                    waiting requests in arrival order
    LongestPrefixMatch  "lpm"              SGLang's: the most cached prompt first
"""

from __future__ import annotations

from inferlab.engines.serve.request import PREEMPTED, RUNNING, Sequence

LPM_MAX_QUEUE = 128
"""Above this many waiting requests "lpm" admits FCFS (SGLang's fallback)."""


def each_running(sched, reserve) -> None:
    """`reserve(seq)` for every running sequence, oldest first, while the token budget lasts
    (one preempted by an older sequence's reservation is skipped). The leading decodes that
    need no preemption are reserved at once first (`Scheduler.reserve_decodes`): what
    `reserve` would do for each of them."""
    b = sched.batch
    for seq in sched.running_seqs[sched.reserve_decodes():]:
        if seq.status != RUNNING:  # preempted just now for an older sequence
            continue
        if b.budget_left == 0:
            break
        reserve(seq)


def decode_running(sched) -> None:
    """Every running sequence decodes one token, oldest first, while the budget lasts (a
    decode the pool cannot serve preempts the newest, `Scheduler.reserve_decode`)."""
    each_running(sched, sched.reserve_decode)


class Continuous:
    """vLLM v1: running sequences first (one token per decode; the one prefill still in
    progress continues with a chunk), then waiting requests, in the admission order, take
    prefill chunks from the token budget left, chunked when they do not fit. Blocks are
    reserved chunk by chunk. A decode the pool cannot serve preempts the newest running
    sequence (recompute) until it fits or preempts itself; no request is admitted in an
    iteration that preempted."""

    splits_prefill = True
    preempts = True
    can_fork = True
    steady_decodes = True

    def schedule(self, sched, now_s: float) -> None:
        b = sched.batch

        def reserve(seq) -> None:
            if not seq.is_prefilling:
                sched.reserve_decode(seq)
                return
            n = min(seq.num_remaining_prefill_tokens, b.budget_left)
            while not sched.reserve_prefill(seq, n):
                victim = sched.running_seqs[-1]
                sched.preempt(victim, seq)
                if victim is seq:
                    break

        # Running first, oldest first. The only prefill still in progress is always the newest
        # running sequence (admission stops when a chunk uses up the budget or the pool), so
        # the decodes come before it.
        each_running(sched, reserve)
        if b.preempted or not sched.waiting_seqs:
            return
        sched.order_waiting()
        while sched.waiting_seqs and b.budget_left and \
                len(sched.running_seqs) < sched.max_num_seqs:
            seq = sched.waiting_seqs[0]
            n = min(seq.num_remaining_prefill_tokens, b.budget_left)
            if not sched.reserve_prefill(seq, n):
                return
            sched.admit(seq)


class NoChunking:
    """vLLM v0's default, prefill-first: if the first waiting requests fit whole (budget and
    pool), the iteration is prefill-only; otherwise every running sequence decodes. A prefill
    is never split (so a re-prefill after a preemption must fit the budget whole too)."""

    splits_prefill = False
    preempts = True
    can_fork = True
    steady_decodes = True

    def schedule(self, sched, now_s: float) -> None:
        b = sched.batch
        sched.order_waiting()
        while sched.waiting_seqs and len(sched.running_seqs) < sched.max_num_seqs:
            seq = sched.waiting_seqs[0]
            n = seq.num_remaining_prefill_tokens  # before prefix hits: a safe bound
            if n > b.budget_left or not sched.reserve_prefill(seq, n):
                break
            sched.admit(seq)
        if b.prefills:  # prefill-only iteration: the running sequences' decodes wait
            return
        decode_running(sched)


class Static:
    """A fixed batch: it starts when `static_batch_size` requests wait (or the oldest has
    waited `static_timeout_s`, or arrivals are closed), prefills in one iteration, then
    decodes until EVERY member has finished; nobody joins meanwhile, so finished members
    leave idle slots (bubbles). Its blocks for prompt + max_new_tokens are checked at the
    start, so a static batch never preempts (and never forks)."""

    splits_prefill = False
    preempts = False
    can_fork = False
    steady_decodes = True

    def schedule(self, sched, now_s: float) -> None:
        if sched.running_seqs:  # the batch decodes until its last member finishes
            decode_running(sched)
            return
        if not sched.waiting_seqs or not self.batch_ready(sched, now_s):
            return
        # a new batch: FCFS while the members' prompts fit the budget and their whole
        # prompt + max_new_tokens fit the pool (then no decode of theirs can run out of blocks)
        b, blocks = sched.batch, sched.blocks
        free = blocks.n_free_blocks
        for seq in sched.waiting_seqs[: sched.static_batch_size]:
            request = seq.request
            need = blocks.blocks_needed(len(request.prompt_ids) + request.max_new_tokens)
            n = seq.num_remaining_prefill_tokens
            if n > b.budget_left or need > free or not sched.reserve_prefill(seq, n):
                break
            free -= need
            sched.admit(seq)

    @staticmethod
    def batch_ready(sched, now_s: float) -> bool:
        """Whether a new batch starts now: enough waiting, arrivals closed, or the oldest
        waiting request has waited `static_timeout_s`."""
        waiting = sched.waiting_seqs
        if len(waiting) >= sched.static_batch_size or sched.arrivals_closed:
            return True
        timeout = sched.static_timeout_s
        return timeout is not None and now_s - waiting[0].request.arrival_s >= timeout


class Fcfs:
    """Waiting requests are admitted in arrival order (preempted ones at the front)."""

    def order(self, waiting: list[Sequence], blocks) -> list[Sequence]:
        return waiting


class LongestPrefixMatch:
    """SGLang's longest prefix match: the waiting request whose prompt the prefix cache holds
    most of goes first (a stable sort: ties stay in arrival order), so requests sharing a
    prefix run while it is cached; preempted ones stay in front. A queue longer than
    LPM_MAX_QUEUE is served FCFS, as SGLang does, because matching every waiting prompt each
    iteration costs more than it saves there."""

    def order(self, waiting: list[Sequence], blocks) -> list[Sequence]:
        if not 1 < len(waiting) <= LPM_MAX_QUEUE:
            return waiting
        cached = blocks.cached_prefix_len
        front = [s for s in waiting if s.status == PREEMPTED]
        rest = [s for s in waiting if s.status != PREEMPTED]
        rest.sort(key=lambda s: -cached(s.prefill_token_ids))
        return front + rest
