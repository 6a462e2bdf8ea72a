"""The batching scheduler: which sequences run in the next iteration, and how many tokens each.

The engine loop is `out = scheduler.schedule(now_s)`, run the model on `out`, then
`scheduler.update(out, sampled, now_s)`. Blocks are reserved in `schedule` (through the paged
`BlockManager`, prefix caching included); K/V counts advance, tokens are appended and finished
sequences free their blocks in `update`.

Policies (`POLICIES`, one small class each in `policies.py`): "continuous" (vLLM v1, chunked
prefill, preemption by recompute), "continuous-no-chunking" (vLLM v0's prefill-first, a prefill
never split) and "static" (a fixed batch that decodes until its last member finishes, never
preempting). Which waiting request is admitted next (`SCHEDULES`, the continuous policies):
"fcfs", arrival order, or "lpm", SGLang's longest prefix match (`policies.LongestPrefixMatch`).
Preempted sequences stay at the front either way.

Preemption is vLLM's recompute: the victim's blocks are freed, its computed count drops to 0,
its outputs stay, and it waits at the FRONT of the queue to re-prefill prompt + outputs.

Parallel sampling forks (vLLM v0's n > 1; `forks.py`): right after a parent's prefill,
`update(..., forks=...)` gives it children that share every block, each with its own first
token; the block copies those shared blocks need later are in `SchedulerOutput.copies`.

A decode step, the common case, takes fast paths that schedule exactly what one sequence at a
time would: `reserve_decodes` reserves the leading running decodes in one
`BlockManager.append_each`; after a step that kept every running sequence, `update` leaves a
`Steady` (`batch.py`) from which the next step reserves the same decodes without looking at
each, and, with nothing waiting, `_schedule_steady` makes that step's output without running
the policy; the executors' `SampledTokens` reach `update` as they are.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from collections.abc import Sequence as Seq
from operator import index

from inferlab.engines.kv.block_manager import BlockManager, SeqTables
from inferlab.engines.serve.batch import (
    Batch,
    BlockCopy,
    PrefillChunk,
    SampledTokens,
    SchedulerOutput,
    Steady,
    context_tokens,
    new_output,
)
from inferlab.engines.serve.forks import check_update_forks, fork_sequence
from inferlab.engines.serve.policies import (
    Continuous,
    Fcfs,
    LongestPrefixMatch,
    NoChunking,
    Static,
)
from inferlab.engines.serve.request import (
    FINISHED,
    LENGTH,
    PREEMPTED,
    RUNNING,
    STOP,
    Request,
    Sequence,
)

CONTINUOUS = "continuous"
NO_CHUNKING = "continuous-no-chunking"
STATIC = "static"
POLICIES = (CONTINUOUS, NO_CHUNKING, STATIC)
FCFS = "fcfs"
LPM = "lpm"
SCHEDULES = (FCFS, LPM)
BATCHING = {CONTINUOUS: Continuous, NO_CHUNKING: NoChunking, STATIC: Static}
"""Policy name -> its class (`policies.py`)."""
ORDERS = {FCFS: Fcfs, LPM: LongestPrefixMatch}
"""Schedule name -> the class that orders the waiting queue (`policies.py`)."""


class RequestRefusedError(ValueError):
    """A request this scheduler can never run (too large for the pool or the token budget)."""


class Scheduler:
    """Queues, the token budget and block reservation for one policy over one BlockManager.

    The policy (`batching`, from `policies.py`) chooses each batch through the reservation
    steps below (`reserve_decode`, `reserve_prefill`, `preempt`, `admit`, `order_waiting`)
    over the live queues `waiting_seqs` and `running_seqs` and the batch being built
    (`batch`); the properties `waiting` and `running` are copies for the lab."""

    def __init__(
        self,
        policy: str,
        block_manager: BlockManager,
        max_num_batched_tokens: int = 2048,
        max_num_seqs: int = 128,
        static_batch_size: int = 8,
        static_timeout_s: float | None = None,
        schedule: str = FCFS,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; choose one of "
                             f"{', '.join(SCHEDULES)}")
        if max_num_batched_tokens < 1 or max_num_seqs < 1 or static_batch_size < 1:
            raise ValueError("max_num_batched_tokens, max_num_seqs and static_batch_size "
                             "must be >= 1")
        if policy == STATIC and static_batch_size > min(max_num_seqs, max_num_batched_tokens):
            raise ValueError(
                f"static_batch_size {static_batch_size} exceeds max_num_seqs {max_num_seqs} "
                f"or max_num_batched_tokens {max_num_batched_tokens}: its decodes would not fit"
            )
        self.policy = policy
        self.schedule_order = schedule
        self.batching = BATCHING[policy]()
        self.admission = ORDERS[schedule]()
        self.blocks = block_manager
        self.block_size = block_manager.block_size
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.static_batch_size = static_batch_size
        self.static_timeout_s = static_timeout_s
        self.arrivals_closed = False
        self.seqs: dict[str, Sequence] = {}
        self.waiting_seqs: list[Sequence] = []
        self.running_seqs: list[Sequence] = []
        self._finished: list[Sequence] = []
        self._pending: SchedulerOutput | None = None
        self._decode_seqs: list[Sequence] = []  # the pending output's, as Sequence objects
        self._sample_seqs: list[Sequence] = []
        self._steady: Steady | None = None  # after a decode step that keeps every sequence
        self._n_left: int | None = None  # the pending output's, when a steady step (Steady)
        self._tables: SeqTables | None = None
        self.batch = Batch(max_num_batched_tokens)
        self.num_iterations = 0
        self.num_preemptions = 0

    # ---- the lab's view ----------------------------------------------------------------------
    @property
    def waiting(self) -> list[Sequence]:
        """Waiting sequences, the next admitted first (preempted ones at the front)."""
        return list(self.waiting_seqs)

    @property
    def running(self) -> list[Sequence]:
        """Running sequences, oldest admission first (the newest is preempted first)."""
        return list(self.running_seqs)

    @property
    def finished(self) -> list[Sequence]:
        return list(self._finished)

    @property
    def kv_used_blocks(self) -> int:
        """Blocks held by sequences (cached-free blocks count as free)."""
        return self.blocks.n_blocks - self.blocks.n_free_blocks

    @property
    def kv_usage(self) -> float:
        """kv_used_blocks / the pool's blocks."""
        return self.kv_used_blocks / self.blocks.n_blocks

    @property
    def has_unfinished(self) -> bool:
        return bool(self.waiting_seqs or self.running_seqs)

    # ---- arrivals ----------------------------------------------------------------------------
    def add(self, request: Request) -> Sequence:
        """Queue a request when it arrives (at `request.arrival_s` on the run's clock).

        Refuses, with the numbers, one that can never run: prompt + max_new_tokens needs more
        blocks than the pool has; or, for the policies that never split a prefill, a prompt
        over the token budget (and for continuous-no-chunking, prompt + max_new_tokens - 1,
        the longest re-prefill after a preemption).
        """
        if self.arrivals_closed:
            raise RuntimeError("arrivals are closed")
        rid = request.request_id
        if rid in self.seqs:
            raise ValueError(f"request {rid!r} was already added")
        self.check_runnable(request)
        seq = Sequence(request)
        self.seqs[rid] = seq
        self.waiting_seqs.append(seq)
        return seq

    def check_runnable(self, request: Request) -> None:
        """RequestRefusedError, with the numbers, for a request this scheduler can never run
        (see `add`)."""
        rid = request.request_id
        n_prompt, n_new = len(request.prompt_ids), request.max_new_tokens
        total = n_prompt + n_new
        need = self.blocks.blocks_needed(total)
        pool = self.blocks.n_blocks
        if need > pool:
            raise RequestRefusedError(
                f"request {rid!r}: prompt {n_prompt} + max_new_tokens {n_new} = {total} tokens "
                f"needs {need} KV blocks of {self.block_size} tokens, but the pool has {pool} "
                f"blocks ({pool * self.block_size} tokens); it can never run"
            )
        budget, batching = self.max_num_batched_tokens, self.batching
        if not batching.splits_prefill and n_prompt > budget:
            raise RequestRefusedError(
                f"request {rid!r}: its prompt of {n_prompt} tokens exceeds "
                f"max_num_batched_tokens={budget}, and policy {self.policy!r} never splits a "
                "prefill; it can never run"
            )
        if not batching.splits_prefill and batching.preempts and total - 1 > budget:
            raise RequestRefusedError(
                f"request {rid!r}: prompt {n_prompt} + up to {n_new - 1} outputs = "
                f"{total - 1} tokens, which a recompute after a preemption re-prefills in one "
                f"iteration, exceed max_num_batched_tokens={budget} (policy {self.policy!r} "
                "never splits a prefill)"
            )

    def close_arrivals(self) -> None:
        """No more requests will come: a static batch need not wait to fill up."""
        self.arrivals_closed = True

    # ---- one iteration -----------------------------------------------------------------------
    def schedule(self, now_s: float) -> SchedulerOutput:
        """Choose the next iteration's batch within the token budget and max_num_seqs, and
        reserve its KV slots. An empty output means nothing can run now (a static batch
        waiting to fill, or nothing waiting)."""
        if self._pending is not None:
            raise RuntimeError("schedule() called twice without update()")
        steady, self._steady = self._steady, None
        if steady is not None and not self.waiting_seqs and self.batching.steady_decodes:
            out = self._schedule_steady(steady, now_s)
            if out is not None:
                return out
        else:
            self.batch = Batch(self.max_num_batched_tokens, steady)
        self.batching.schedule(self, now_s)
        b = self.batch
        for chunk in b.prefills:  # a decode was scheduled before: its prefill was
            seq = self.seqs[chunk.seq_id]
            if seq.first_scheduled_s is None:
                seq.first_scheduled_s = now_s
        decodes = b.steady_ids  # the last step's decodes again, or None
        if decodes is None or len(decodes) != len(b.decodes):
            decodes = tuple(b.decodes)
        out = new_output(
            policy=self.policy, now_s=now_s, prefills=tuple(b.prefills), decodes=decodes,
            preempted=tuple(b.preempted),
            sample_ids=decodes if len(b.sample_ids) == len(decodes) else tuple(b.sample_ids),
            num_batched_tokens=b.num_tokens, preempted_for=tuple(b.preempted_for),
            copies=tuple(b.copies), cached_tokens=b.cached or None,
            decode_context_tokens=b.decode_context_tokens)
        self._pending = out
        self._decode_seqs, self._sample_seqs = b.decode_seqs, b.sample_seqs
        self._n_left, self._tables = b.n_left, b.tables
        self.num_iterations += 1
        return out

    def _schedule_steady(self, steady: Steady, now_s: float) -> SchedulerOutput | None:
        """A steady step (`Steady`) with nothing waiting, under a policy whose batch is then
        every running sequence's decode (`steady_decodes`): those decodes reserved at once and
        the output made from the last step's, without running the policy. None when it is not
        one after all: the running queue changed or outgrew the budget (then `batch` is empty),
        or the pool ran short (then `batch` holds the decodes reserved, for the policy to go on
        from, as after `reserve_decodes`)."""
        ids, seqs = steady.ids, steady.seqs
        b = self.batch = Batch(self.max_num_batched_tokens)
        if seqs != self.running_seqs or len(ids) > b.budget:
            return None
        tables = steady.tables if steady.tables is not None else self.blocks.tables(ids)
        n, cows = self.blocks.append_each(ids, steady.tokens, tables=tables)
        copies = [BlockCopy(*c) for c in cows]
        if n < len(ids):
            seqs = seqs[:n]
            b.add_decodes(ids[:n], seqs, context_tokens(seqs), copies)
            return None
        n_left = steady.n_left
        if n_left is None:
            n_left = min([seq.max_new_tokens - len(seq.output_ids) for seq in seqs])
        out = new_output(
            policy=self.policy, now_s=now_s, prefills=(), decodes=ids, preempted=(),
            sample_ids=ids, num_batched_tokens=n, preempted_for=(), copies=tuple(copies),
            cached_tokens=None, decode_context_tokens=steady.context_tokens + n)
        self._pending = out
        self._decode_seqs = self._sample_seqs = seqs
        self._n_left, self._tables = n_left, tables
        self.num_iterations += 1
        return out

    def update(
        self, output: SchedulerOutput, sampled: dict[str, int], now_s: float,
        eos_id: int | Collection[int] | None = None, *, keep_eos: bool = True,
        forks: Mapping[str, Seq[tuple[Request, int]]] | None = None,
    ) -> list[Sequence]:
        """The model ran `output`: advance K/V counts, append `sampled` tokens (one per
        `output.sample_ids`, stamped `now_s`), finish at max_new_tokens or EOS (one id or
        several; unless ignore_eos) and free finished sequences' blocks. Returns the sequences
        finished now, in the order they finished.

        The EOS token is kept as the last output, as vLLM does; `keep_eos=False` drops it (the
        sequence ends before it, as generate() and the KV lab say "end of text").
        `forks[parent_id]` = [(child request, the child's first token), ...]: the parent's
        prefill ended in this batch and each child samples its own token from the same logits;
        the children are forked (`fork`) before any token of the parent is appended, so they
        share exactly its computed blocks, and their tokens go first."""
        if output is not self._pending:
            raise RuntimeError("update() must get the output of the last schedule()")
        sample_ids = output.sample_ids
        tokens = None
        if type(sampled) is SampledTokens and sampled.ids is sample_ids:
            tokens = sampled.tokens  # made for this batch, python ints
        elif len(sampled) == len(sample_ids):  # they match if each is there (all distinct)
            try:  # python ints: `index` gives int's result for an int or a numpy/torch integer
                tokens = list(map(index, map(sampled.__getitem__, sample_ids)))
            except KeyError:
                pass
            except TypeError:
                tokens = [int(sampled[sid]) for sid in sample_ids]
        if tokens is None:
            missing = [sid for sid in sample_ids if sid not in sampled]
            extra = sorted(set(sampled) - set(sample_ids))
            raise ValueError(f"sampled tokens do not match the batch: missing {missing}, "
                             f"not sampling this iteration {extra}")
        if forks:  # all refusals before any change
            check_update_forks(self, sample_ids, forks)
        if eos_id is None:
            stop_ids: Collection[int] = ()
        elif isinstance(eos_id, Collection):
            stop_ids = frozenset(int(t) for t in eos_id)
        else:
            stop_ids = (int(eos_id),)
        self._pending = None
        prefills = output.prefills
        if prefills:
            seqs, computed = self.seqs, []
            for chunk in prefills:
                seq = seqs[chunk.seq_id]
                seq.num_computed_tokens += chunk.n_tokens
                computed.append(seq.num_computed_tokens)
            self.blocks.mark_computed_each([c.seq_id for c in prefills], computed)
        # each decode computed its one token: every token it reserved
        decode_seqs, sample_seqs = self._decode_seqs, self._sample_seqs
        if decode_seqs:
            self.blocks.mark_all_computed(output.decodes)
        done: list[Sequence] = []
        if forks or len(decode_seqs) != len(sample_seqs):  # forks, or prefills sample too
            for seq in decode_seqs:
                seq.num_computed_tokens += 1
            for seq, token in zip(sample_seqs, tokens, strict=True):
                sid = seq.seq_id
                if forks and sid in forks:
                    for child, child_token in forks[sid]:
                        self._sampled(self.fork(sid, child), child_token, now_s, stop_ids,
                                      keep_eos, done)
                self._append(seq, token, now_s, stop_ids, keep_eos, done)
            return done
        # only decodes sample (then they are the same, in order): a decode step, the common
        # case, with the per-sequence work inlined
        n_left = self._n_left
        if n_left is not None and n_left > 1 and not stop_ids:
            # a steady step (see Steady) that finishes nobody: no EOS to look for, and every
            # sequence is two tokens or more from its max_new_tokens
            for seq, token in zip(sample_seqs, tokens, strict=True):
                seq.num_computed_tokens += 1
                seq.output_ids.append(token)
                seq.token_times_s.append(now_s)
        else:
            for seq, token in zip(sample_seqs, tokens, strict=True):
                seq.num_computed_tokens += 1
                outputs = seq.output_ids  # `_append`, inlined
                if (token not in stop_ids or seq.request.ignore_eos) and \
                        len(outputs) + 1 < seq.max_new_tokens:
                    outputs.append(token)
                    seq.token_times_s.append(now_s)
                else:  # it finishes
                    self._sampled(seq, token, now_s, stop_ids, keep_eos, done)
        if decode_seqs and not done and decode_seqs == self.running_seqs:
            # every running sequence decodes again next step, feeding back `tokens`
            self._steady = Steady(decode_seqs, output.decodes, tokens,
                                   output.decode_context_tokens,
                                   None if n_left is None else n_left - 1, self._tables)
        return done

    def _append(self, seq: Sequence, token: int, now_s: float, stop_ids: Collection[int],
                keep_eos: bool, done: list[Sequence]) -> None:
        """`seq` sampled `token`: appended (the common case), or it finishes (`_sampled`)."""
        outputs = seq.output_ids
        if (token not in stop_ids or seq.request.ignore_eos) and \
                len(outputs) + 1 < seq.max_new_tokens:
            outputs.append(token)
            seq.token_times_s.append(now_s)
        else:
            self._sampled(seq, token, now_s, stop_ids, keep_eos, done)

    def _sampled(self, seq: Sequence, token: int, now_s: float, stop_ids: Collection[int],
                 keep_eos: bool, done: list[Sequence]) -> None:
        token = int(token)
        eos = token in stop_ids and not seq.request.ignore_eos
        if not eos or keep_eos:
            seq.output_ids.append(token)
            seq.token_times_s.append(now_s)
        if eos or len(seq.output_ids) >= seq.request.max_new_tokens:
            seq.status = FINISHED
            seq.finish_reason = STOP if eos else LENGTH
            seq.finish_s = now_s
            self.blocks.free(seq.seq_id)
            self.running_seqs.remove(seq)
            self._finished.append(seq)
            done.append(seq)

    def fork(self, parent_id: str, child: Request) -> Sequence:
        """Parallel sampling: `child` (the parent's prompt, a new id) shares every block of the
        running `parent_id` (BlockManager.fork: ref counts + 1), copies its outputs and token
        times, and runs from now on. Only between iterations (after `update`, or inside it
        through `forks`), once the parent's prefill is done, never in a static batch; a child
        `add` would refuse is refused the same way, and one over max_num_seqs is a ValueError.
        The child runs right after the parent and its earlier children: as old as the parent,
        so preempted before it (`forks.fork_sequence`)."""
        if self._pending is not None:
            raise RuntimeError("fork() between schedule() and update(): fork after update")
        return fork_sequence(self, parent_id, child)

    # ---- reservation: the policies' steps ---------------------------------------------------
    def reserve_decode(self, seq: Sequence) -> bool:
        """Reserve the slot of the token `seq` feeds back, preempting the newest running
        sequences while the pool has no block for it. False if `seq` preempted itself."""
        sid = seq.seq_id
        while not self.blocks.can_append(sid):
            victim = self.running_seqs[-1]
            self.preempt(victim, seq)
            if victim is seq:
                return False
        # append_each, not append_token: with layer groups one token may copy a block in each
        cows = self.blocks.append_each((sid,), (seq.output_ids[-1],), partial=False)[1]
        if cows:
            self.batch.copies.extend(BlockCopy(*cow) for cow in cows)
        self.batch.decode(seq)
        return True

    def reserve_decodes(self) -> int:
        """`reserve_decode` for the leading running sequences at once, while they decode, the
        budget lasts and the pool has their blocks (a decode step's common case: no
        preemption); returns how many it reserved. The policies go on one by one from there."""
        b = self.batch
        if b.reserved is not None:  # reserved before the policy ran (`_schedule_steady`)
            return b.reserved
        b.reserved = 0
        running = self.running_seqs
        steady, b.steady = b.steady, None
        if steady is not None and steady.seqs == running and \
                len(running) <= b.budget - b.num_tokens:
            # the last step decoded every running sequence and none finished: the same
            # decodes, each feeding back the token it sampled
            seqs, ids, tokens = running, steady.ids, steady.tokens
            tables = steady.tables if steady.tables is not None else self.blocks.tables(ids)
        else:
            steady = None
            n = 0
            for seq in running:
                if seq.num_computed_tokens < seq.num_prefill_tokens:
                    break
                n += 1
            seqs = running[: min(n, b.budget - b.num_tokens)]
            if not seqs:
                return 0
            ids = [seq.seq_id for seq in seqs]
            tokens = [seq.output_ids[-1] for seq in seqs]
            tables = None
        n, cows = self.blocks.append_each(ids, tokens, tables=tables)
        # a decode's context after the step: prompt + outputs, every token it reserved
        if steady is not None and n == len(seqs):  # each holds one token more than before
            n_context = steady.context_tokens + n
            n_left = steady.n_left
            if n_left is None:
                n_left = min([seq.max_new_tokens - len(seq.output_ids) for seq in seqs])
            b.n_left, b.tables, b.steady_ids = n_left, tables, ids
        else:
            if n < len(seqs):
                seqs, ids = seqs[:n], ids[:n]
            n_context = context_tokens(seqs)
        b.add_decodes(ids, seqs, n_context, [BlockCopy(*c) for c in cows])
        return n

    def reserve_prefill(self, seq: Sequence, n_tokens: int) -> bool:
        """Reserve the next `n_tokens` prefill tokens of `seq` (prefix hits free on the first
        chunk) if the pool has them now; False (nothing changed) if not."""
        sid, tokens = seq.seq_id, seq.prefill_token_ids
        cached = 0
        if sid not in self.blocks:
            cached = self.blocks.try_allocate(sid, tokens, n_tokens)
            if cached is None:
                return False
            seq.num_computed_tokens = cached
            if seq.num_cached_tokens is None:
                seq.num_cached_tokens = seq.num_computed_tokens
            self.batch.copies.extend(BlockCopy(sid, *c) for c in self.blocks.take_copies())
        else:
            if not self.blocks.can_append(sid, n_tokens):
                return False
            start = seq.num_computed_tokens
            cows = self.blocks.append_tokens(sid, tokens[start : start + n_tokens])
            self.batch.copies.extend(BlockCopy(sid, *c) for c in cows)
        start = seq.num_computed_tokens
        n = self.blocks.num_tokens(sid) - start
        if cached:
            self.batch.cached[sid] = cached
        self.batch.prefill(seq, PrefillChunk(sid, start, n),
                           samples=start + n == seq.num_prefill_tokens)
        return True

    def admit(self, seq: Sequence) -> None:
        """`seq` (whose first chunk is reserved) leaves the waiting queue and runs."""
        self.waiting_seqs.remove(seq)
        seq.status = RUNNING
        self.running_seqs.append(seq)

    def preempt(self, seq: Sequence, needed_by: Sequence) -> None:
        """Recompute preemption of `seq` for `needed_by`'s reservation: its blocks freed, back
        to the FRONT of the waiting queue to re-prefill prompt + outputs."""
        self.blocks.free(seq.seq_id)
        self.running_seqs.remove(seq)
        seq.status = PREEMPTED
        seq.num_computed_tokens = 0
        seq.num_prefill_tokens = seq.num_tokens
        seq.preemptions += 1
        self.waiting_seqs.insert(0, seq)
        self.batch.preempted.append(seq.seq_id)
        self.batch.preempted_for.append(needed_by.seq_id)
        self.num_preemptions += 1

    def order_waiting(self) -> None:
        """The waiting queue in the admission order (`admission`: "fcfs" or "lpm");
        preempted sequences stay in front."""
        self.waiting_seqs = self.admission.order(self.waiting_seqs, self.blocks)
