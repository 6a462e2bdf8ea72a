"""`KVLabSession`: one scenario run step by step, the real model on the paged cache, the
contiguous allocator on the same requests beside it.

One `step()` is one engine iteration, as in vLLM's scheduler loop:

    1. arrivals: a request that can never fit (longer than the pool or the model's context)
       is refused with the allocator's message; the others wait (first come, first served)
    2. every running sequence reserves the slot of the token it sampled last step
       (copy-on-write if its last block is shared); when no block is free the youngest
       running sequence is preempted: its blocks are freed and it waits again, to be
       recomputed (its own freed blocks may still be in the prefix cache)
    3. waiting sequences are admitted while their prompt fits (prefix hits are free)
    4. ONE model forward over every running sequence (prefills and decodes in one flat batch)
    5. each sequence samples its next token; a request with n samples forks right after its
       prefill (the samples share every block); finished sequences free their blocks
    6. the contiguous allocator replays the same requests on the same memory: each request
       reserves `max_seq_len` slots (first fit) and stores one more token per step, as far as
       the model has produced it
    7. a frozen `KVStepRecord` is returned

The session never touches Qt and never knows who watches it.
"""

from __future__ import annotations

import time
from collections import defaultdict

from inferlab.engines.kv.contiguous import ContiguousAllocator
from inferlab.engines.kv.errors import KVCapacityError, KVOutOfMemoryError
from inferlab.engines.kvlab.records import (
    FINISHED,
    PREEMPTED,
    REFUSED,
    RUNNING,
    STALLED,
    WAITING,
    ContiguousRegion,
    KVRunInfo,
    KVStepRecord,
    SeqInfo,
    SeqStep,
)
from inferlab.engines.kvlab.scenarios import PreparedRequest, PreparedScenario, prepare
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.sampler import GREEDY, Sampler, SamplingParams

MAX_STEPS = 2000
"""A run stops here whatever happens (a guard, not a scenario length)."""


class _Seq:
    """A sequence's mutable life in the session (never handed out: records are)."""

    def __init__(self, info: SeqInfo, req: PreparedRequest, sampler: Sampler) -> None:
        self.info = info
        self.req = req
        self.prompt_ids = list(req.prompt_ids)
        self.outputs: list[int] = []
        self.sampler = sampler
        self.status = WAITING
        self.n_cached = 0
        self.forked = False
        self.ever_ran = False
        self.message = ""
        self.c_status = WAITING
        self.c_produced = 0
        self.children: list[str] = []
        self.said: dict[str, str] = {}

    @property
    def done(self) -> bool:
        return self.status in (FINISHED, REFUSED)


class KVLabSession:
    """A prepared scenario on a model: `step()` until `done`, each step a `KVStepRecord`."""

    def __init__(self, model, tokenizer, scenario: PreparedScenario | str,
                 block_size: int = 16, n_blocks: int | None = None) -> None:
        if isinstance(scenario, str):
            scenario = prepare(scenario, tokenizer, block_size, n_blocks)
        self.model = model
        self.tokenizer = tokenizer
        self.scenario = scenario
        self.block_size = scenario.block_size
        self.n_blocks = scenario.n_blocks
        self.max_seq_len = scenario.max_seq_len
        self.runner = ModelRunner(model, n_blocks=self.n_blocks, block_size=self.block_size,
                                  enable_prefix_caching=True)
        self.blocks = self.runner.blocks
        self.bytes_per_slot = self.runner.cache.bytes_per_slot
        self.contiguous = ContiguousAllocator(self.n_blocks * self.block_size, self.max_seq_len,
                                              self.bytes_per_slot)
        self.stop_ids = frozenset(getattr(tokenizer, "eos_token_ids", ()) or ())
        self.max_position = model.config.max_position
        self.seqs: dict[str, _Seq] = {}
        self.waiting: list[str] = []
        self.running: list[str] = []
        self.c_waiting: list[str] = []
        self.c_running: list[str] = []
        self._arrivals: dict[int, list[PreparedRequest]] = defaultdict(list)
        for req in scenario.requests:
            self._arrivals[req.spec.arrival_step].append(req)
        self._last_arrival = max(self._arrivals, default=0)
        self.step_index = 0
        self.n_preemptions = 0
        self.n_cow_copies = 0

    # ---- facts -----------------------------------------------------------------------------
    @property
    def info(self) -> KVRunInfo:
        sc = self.scenario.scenario
        cfg = self.model.config
        return KVRunInfo(scenario=sc.name, scenario_title=sc.title,
                         scenario_description=sc.description, model_id=cfg.id,
                         model_name=cfg.name, device=str(self.model.device),
                         block_size=self.block_size, n_blocks=self.n_blocks,
                         max_seq_len=self.max_seq_len, bytes_per_slot=self.bytes_per_slot)

    def seq_infos(self) -> tuple[SeqInfo, ...]:
        """Every sequence created so far, in creation order (samples appear at their fork)."""
        return tuple(s.info for s in self.seqs.values())

    @property
    def done(self) -> bool:
        """All requests arrived and every one finished or was refused, on both allocators."""
        if self.step_index >= MAX_STEPS:
            return True
        return (self.step_index > self._last_arrival and not self.waiting and not self.running
                and not self.c_waiting and not self.c_running)

    # ---- the step --------------------------------------------------------------------------
    def step(self) -> KVStepRecord:
        if self.done:
            raise RuntimeError("the scenario has finished; reset it to run it again")
        t0 = time.perf_counter()
        t = self.step_index
        events: list[str] = []
        for req in self._arrivals.get(t, ()):
            self._arrive(req, events)
        self._grow(events)
        self._admit(events)
        ran = bool(self.running)
        if ran:
            logits = self.runner.step(self.running)
            self._sample(logits, events)
        self._contiguous_step(events)
        record = KVStepRecord(
            step=t, paged=self.blocks.stats(t), contiguous=self.contiguous.stats(t),
            pool=self.blocks.pool_state(), regions=self._regions(),
            contiguous_free=tuple(self.contiguous.free_extents()), seqs=self._seq_steps(),
            events=tuple(events), ran_model=ran, step_s=time.perf_counter() - t0)
        self.step_index += 1
        return record

    def run(self, max_steps: int | None = None) -> list[KVStepRecord]:
        """Step until done (or `max_steps` more steps); the records in order."""
        out = []
        while not self.done and (max_steps is None or len(out) < max_steps):
            out.append(self.step())
        return out

    # ---- 1. arrivals -------------------------------------------------------------------------
    def _new_seq(self, req: PreparedRequest, sample: int) -> _Seq:
        spec = req.spec
        seq_id = spec.request_id if sample == 0 else f"{spec.request_id}.{sample}"
        if spec.temperature > 0:
            sampler = Sampler(SamplingParams(spec.temperature, 0.9, spec.seed * 1000 + sample))
        else:
            sampler = Sampler(GREEDY)
        info = SeqInfo(seq_id=seq_id, request_id=spec.request_id, color=len(self.seqs),
                       user_text=spec.user, system_text=spec.system,
                       prompt_tokens=len(req.prompt_ids), max_new_tokens=spec.max_new_tokens,
                       temperature=spec.temperature, sample=sample)
        seq = _Seq(info, req, sampler)
        self.seqs[seq_id] = seq
        return seq

    def _arrive(self, req: PreparedRequest, events: list[str]) -> None:
        seq = self._new_seq(req, 0)
        sid, spec = seq.info.seq_id, req.spec
        total = len(req.prompt_ids) + spec.max_new_tokens
        samples = f" ×{spec.n_samples} samples" if spec.n_samples > 1 else ""
        try:
            if total > self.max_position:
                raise KVCapacityError(
                    f"a request of {total} tokens is longer than the model's context of "
                    f"{self.max_position} tokens; it can never run")
            self.blocks.can_allocate(total)  # KVCapacityError: never fits in the pool
        except KVCapacityError as exc:
            seq.status = seq.c_status = REFUSED
            seq.message = f"refused: {exc} (prompt {len(req.prompt_ids)} + up to " \
                          f"{spec.max_new_tokens} new tokens)"
            events.append(f"{sid} {seq.message}")
            return
        self.waiting.append(sid)
        events.append(f"{sid} arrives{samples}: {len(req.prompt_ids)} prompt tokens, up to "
                      f"{spec.max_new_tokens} new")
        n_slots, region = self.contiguous.n_slots, self.max_seq_len
        if total > region:
            problem = f"{total} tokens exceed the {region}-slot region"
        elif spec.n_samples * region > n_slots:
            problem = (f"{spec.n_samples} regions of {region} slots do not fit in {n_slots} "
                       "slots")
        else:
            problem = ""
        if problem:
            seq.c_status = REFUSED
            seq.message = f"contiguous refuses it: {problem}; it can never run there"
            events.append(f"{sid} {seq.message}")
        else:
            self.c_waiting.append(sid)

    # ---- 2. growth, preemption ---------------------------------------------------------------
    def _grow(self, events: list[str]) -> None:
        for sid in list(self.running):
            if sid not in self.running:  # preempted for an older sequence just now
                continue
            while not self.blocks.can_append(sid, 1):
                victim = self.running[-1]
                self._preempt(victim, sid, events)
                if victim == sid:
                    break
            else:
                seq = self.seqs[sid]
                cow = self.blocks.append_token(sid, seq.outputs[-1])
                if cow is not None:
                    self.runner.cache.copy_blocks([cow])
                    self.n_cow_copies += 1
                    events.append(f"{sid} copy-on-write: its last block {cow[0]} was shared; "
                                  f"copied to block {cow[1]} before adding a token")

    def _preempt(self, victim: str, needed_by: str, events: list[str]) -> None:
        seq = self.seqs[victim]
        n_blocks = len(self.blocks.block_table(victim))
        self.runner.free(victim)
        seq.said.clear()
        self.running.remove(victim)
        seq.status = PREEMPTED
        self.waiting.insert(0, victim)
        self.n_preemptions += 1
        why = "no free block for its next token" if victim == needed_by else \
            f"no free block for {needed_by}'s next token"
        seq.message = f"preempted at step {self.step_index} ({why}): recomputed when re-admitted"
        events.append(f"{victim} preempted ({why}): its {_blocks(n_blocks)} freed; it waits "
                      "and is recomputed later")

    # ---- 3. admission ------------------------------------------------------------------------
    def _admit(self, events: list[str]) -> None:
        bs = self.block_size
        while self.waiting:
            sid = self.waiting[0]
            seq = self.seqs[sid]
            tokens = seq.prompt_ids + seq.outputs
            if not self.blocks.can_allocate(tokens):
                need = self.blocks.blocks_needed(len(tokens))
                self._say_once(seq, "wait", events,
                               f"{sid} waits: needs up to {_blocks(need)}, "
                               f"{self.blocks.n_free_blocks} free")
                return
            self.waiting.pop(0)
            resumed = seq.status == PREEMPTED
            seq.n_cached = self.runner.add(sid, tokens)
            seq.status = RUNNING
            seq.ever_ran = True
            self.running.append(sid)
            hit = (f", {seq.n_cached} from the prefix cache ({_blocks(seq.n_cached // bs)})"
                   if seq.n_cached else "")
            verb = "re-admitted (recompute)" if resumed else "admitted"
            events.append(f"{sid} {verb}: {len(tokens)} tokens in "
                          f"{_blocks(len(self.blocks.block_table(sid)))}{hit}")

    # ---- 5. sampling, forks, finishing ------------------------------------------------------
    def _sample(self, logits, events: list[str]) -> None:
        order: list[str] = []
        finished: list[_Seq] = []
        for row, sid in enumerate(self.running):
            seq = self.seqs[sid]
            row_logits = logits[row: row + 1]
            order.append(sid)
            n = seq.req.spec.n_samples
            if n > 1 and not seq.forked:
                seq.forked = True
                for k in range(1, n):
                    child = self._new_seq(seq.req, k)
                    cid = child.info.seq_id
                    self.runner.fork(sid, cid)
                    child.status, child.ever_ran, child.n_cached = RUNNING, True, seq.n_cached
                    child.forked = True
                    seq.children.append(cid)
                    order.append(cid)
                    self._accept(child, child.sampler(row_logits)[0], finished)
                table = self.blocks.block_table(sid)
                events.append(f"{sid} forks into {n} samples: all {_blocks(len(table))} shared "
                              f"(ref count {n})")
            self._accept(seq, seq.sampler(row_logits)[0], finished)
        self.running = [sid for sid in order if self.seqs[sid].status == RUNNING]
        for seq in finished:
            sid = seq.info.seq_id
            n_blocks = len(self.blocks.block_table(sid))
            self.runner.free(sid)
            events.append(f"{sid} finished: {len(seq.outputs)} tokens ({seq.message}); "
                          f"{_blocks(n_blocks)} released")

    def _accept(self, seq: _Seq, token: int, finished: list[_Seq]) -> None:
        if token in self.stop_ids:
            seq.status, seq.message = FINISHED, "end of text"
        else:
            seq.outputs.append(int(token))
            if len(seq.outputs) >= seq.req.spec.max_new_tokens:
                seq.status, seq.message = FINISHED, "length"
        if seq.status == FINISHED:
            finished.append(seq)

    # ---- 6. the contiguous baseline ---------------------------------------------------------
    def _contiguous_step(self, events: list[str]) -> None:
        c = self.contiguous
        for sid in list(self.c_running):
            seq = self.seqs[sid]
            if seq.c_produced < len(seq.outputs):
                c.append_token(sid)
                seq.c_produced += 1
                seq.c_status = RUNNING
            elif seq.status != FINISHED:
                seq.c_status = STALLED  # the model has not produced its next token yet
            self._contiguous_finish(seq, events)
        while self.c_waiting:
            sid = self.c_waiting[0]
            seq = self.seqs[sid]
            if not seq.ever_ran:
                return  # its tokens do not exist yet: the model has not admitted it
            group = [sid, *seq.children]
            placed: list[str] = []
            try:
                c.allocate(sid, seq.prompt_ids)
                placed.append(sid)
                for child in seq.children:
                    c.fork(sid, child)
                    placed.append(child)
            except KVOutOfMemoryError:
                for p in placed:
                    c.free(p)
                self._say_once(seq, "c-wait", events,
                               f"contiguous: {sid} waits: needs {len(group)} × "
                               f"{self.max_seq_len} free slots in one piece each, largest free "
                               f"extent {c.largest_free_extent}")
                return
            self.c_waiting.pop(0)
            for g in group:
                member = self.seqs[g]
                self.c_running.append(g)
                member.c_status = RUNNING
                member.c_produced = min(1, len(member.outputs))
                start, reserved = c.region(g)
                events.append(f"contiguous: {g} reserves slots {start}..{start + reserved - 1} "
                              f"({reserved} slots for {len(member.prompt_ids)} prompt tokens)")
                self._contiguous_finish(member, events)

    def _contiguous_finish(self, seq: _Seq, events: list[str]) -> None:
        if seq.status == FINISHED and seq.c_produced >= len(seq.outputs):
            sid = seq.info.seq_id
            self.contiguous.free(sid)
            self.c_running.remove(sid)
            seq.c_status = FINISHED
            events.append(f"contiguous: {sid} finished; its {self.max_seq_len} slots are free")

    @staticmethod
    def _say_once(seq: _Seq, key: str, events: list[str], text: str) -> None:
        """Add `text` unless it is what this sequence last said under `key` (a wait that goes
        on step after step is told once, and again when its numbers change)."""
        if seq.said.get(key) != text:
            seq.said[key] = text
            events.append(text)

    # ---- 7. records ----------------------------------------------------------------------------
    def _regions(self) -> tuple[ContiguousRegion, ...]:
        c = self.contiguous
        out = []
        for sid in c.seq_ids:
            start, reserved = c.region(sid)
            out.append(ContiguousRegion(sid, start, reserved, c.num_tokens(sid)))
        return tuple(sorted(out, key=lambda r: r.start))

    def _seq_steps(self) -> tuple[SeqStep, ...]:
        out = []
        for sid, seq in self.seqs.items():
            kv = self.blocks.num_tokens(sid) if sid in self.blocks else 0
            out.append(SeqStep(seq_id=sid, status=seq.status, contiguous_status=seq.c_status,
                               n_output=len(seq.outputs), kv_tokens=kv, n_cached=seq.n_cached,
                               output_text=self.tokenizer.decode(seq.outputs),
                               message=seq.message))
        return tuple(out)

    def outputs(self) -> dict[str, list[int]]:
        """Generated token ids per sequence so far."""
        return {sid: list(s.outputs) for sid, s in self.seqs.items()}


def _blocks(n: int) -> str:
    return f"{n} block" if n == 1 else f"{n} blocks"
