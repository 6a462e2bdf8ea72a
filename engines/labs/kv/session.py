"""`KVLabSession`: one scenario run step by step, the real model on the paged cache, the
contiguous allocator on the same requests beside it; `kv_lab_model`, `kv_session` and `kv_run`
open and run it for the window and the headless run alike.

The scheduling is engines/serve's `Scheduler`, the app's one scheduler: policy `continuous`
over the runner's BlockManager (prefix caching on), the step index as its clock. Its token
budget is twice the pool's tokens, so a prompt is never chunked (a step's tokens each hold
their own slot, at most the pool, and a prompt longer than the pool is refused): one that fits
is admitted whole, as the lab shows it. One `step()` is one engine iteration, as in vLLM:

    1. arrivals: a request that can never fit (longer than the pool: the scheduler refuses
       it; or longer than the model's context) is refused with the message; the others wait
       (first come, first served)
    2. `schedule`: every running sequence reserves the slot of the token it sampled last step
       (copy-on-write if its last block is shared); when no block is free the newest running
       sequence is preempted: its blocks are freed and it waits again, to be recomputed (its
       own freed blocks may still be in the prefix cache). Then waiting sequences are
       admitted while their prompt fits (prefix hits are free), none in a step that preempted
    3. the copy-on-write copies, then ONE model forward over the batch (prefills and decodes
       in one flat batch, `runner.forward` on the scheduler's chunks)
    4. each sequence samples its next token with its own seeded sampler; a request with n
       samples forks right after its prefill (the samples share every block, each samples its
       own first token); `update` ends a sequence at an end-of-text id (not kept) or at
       max_new_tokens and frees its blocks
    5. the contiguous allocator replays the same requests on the same memory: each request
       reserves `max_seq_len` slots (first fit) and stores one more token per step, as far as
       the model has produced it
    6. a frozen `KVStepRecord` is returned; its events are read off the scheduler's output.
       A model with sliding-window layers keeps one block table per layer group (the runner's
       `KVCacheCoordinator`): the record holds each group's tables and blocks held against
       keeping every token, and the closed form (`roofline.kv_held`) over the same tokens

The session never touches Qt and never knows who watches it.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

from inferlab.engines.kv.contiguous import ContiguousAllocator
from inferlab.engines.kv.errors import KVOutOfMemoryError
from inferlab.engines.kv.group_coordinator import KVCacheCoordinator
from inferlab.engines.kv.radix_state import radix_tree_state
from inferlab.engines.labs.kv.records import (
    FINISHED,
    PREEMPTED,
    REFUSED,
    RUNNING,
    STALLED,
    WAITING,
    ContiguousRegion,
    KVGroupStep,
    KVRunInfo,
    KVStepRecord,
    SeqInfo,
    SeqStep,
)
from inferlab.engines.labs.kv.scenarios import PreparedRequest, PreparedScenario, prepare
from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.sampler import GREEDY, Sampler, SamplingParams
from inferlab.engines.quant.kv_quant import kv_quantized
from inferlab.engines.roofline.kv_held import kv_held
from inferlab.engines.serve import request as serve
from inferlab.engines.serve.request import Request, Sequence
from inferlab.engines.serve.scheduler import (
    CONTINUOUS,
    RequestRefusedError,
    Scheduler,
    SchedulerOutput,
)

MAX_STEPS = 2000
"""A run stops here whatever happens (a guard, not a scenario length)."""

_STATUS = {serve.WAITING: WAITING, serve.RUNNING: RUNNING, serve.PREEMPTED: PREEMPTED,
           serve.FINISHED: FINISHED}
"""The scheduler's sequence states in the lab's words (preempted: waiting to recompute)."""


class _Seq:
    """A sequence's life in the lab (never handed out: records are). Its tokens and state are
    the scheduler's `Sequence` (`sched`, None when refused at arrival)."""

    def __init__(self, info: SeqInfo, req: PreparedRequest, params: SamplingParams) -> None:
        self.info = info
        self.req = req
        self.prompt_ids = list(req.prompt_ids)
        self.params = params
        self.sampler = Sampler(params)
        self.sched: Sequence | None = None
        self.refused = False
        self.n_cached = 0
        self.forked = False
        self.ever_ran = False
        self.message = ""
        self.c_status = WAITING
        self.c_produced = 0
        self.children: list[str] = []
        self.said: dict[str, str] = {}

    @property
    def outputs(self) -> list[int]:
        return self.sched.output_ids if self.sched is not None else []

    @property
    def status(self) -> str:
        return REFUSED if self.refused or self.sched is None else _STATUS[self.sched.status]

    @property
    def done(self) -> bool:
        return self.status in (FINISHED, REFUSED)


class KVLabSession:
    """A prepared scenario on a model: `step()` until `done`, each step a `KVStepRecord`."""

    def __init__(self, model, tokenizer, scenario: PreparedScenario | str,
                 block_size: int = 16, n_blocks: int | None = None,
                 prefix_cache: str = "hash", eviction_policy: str = "lru") -> None:
        if isinstance(scenario, str):
            scenario = prepare(scenario, tokenizer, block_size, n_blocks)
        self.model = model
        self.tokenizer = tokenizer
        self.scenario = scenario
        self.block_size = scenario.block_size
        self.n_blocks = scenario.n_blocks
        self.max_seq_len = scenario.max_seq_len
        self.runner = ModelRunner(model, n_blocks=self.n_blocks, block_size=self.block_size,
                                  prefix_cache=prefix_cache, eviction_policy=eviction_policy)
        self.blocks = self.runner.blocks
        # budget 2 × the pool's tokens: prompts are admitted whole, never chunked (above);
        # no cap on sequences: the pool is the only limit the lab shows
        self.scheduler = Scheduler(CONTINUOUS, self.blocks,
                                   max_num_batched_tokens=2 * self.n_blocks * self.block_size,
                                   max_num_seqs=sys.maxsize)
        self.bytes_per_slot = self.runner.cache.bytes_per_slot
        self.contiguous = ContiguousAllocator(self.n_blocks * self.block_size, self.max_seq_len,
                                              self.bytes_per_slot)
        self.stop_ids = frozenset(getattr(tokenizer, "eos_token_ids", ()) or ())
        self.max_position = model.config.max_position
        self.seqs: dict[str, _Seq] = {}
        self.c_waiting: list[str] = []
        self.c_running: list[str] = []
        self._arrivals: dict[int, list[PreparedRequest]] = defaultdict(list)
        for req in scenario.requests:
            self._arrivals[req.spec.arrival_step].append(req)
        self._last_arrival = max(self._arrivals, default=0)
        self.step_index = 0
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
    def running(self) -> list[str]:
        """Running sequence ids, the oldest first (the newest is preempted first)."""
        return [s.seq_id for s in self.scheduler.running]

    @property
    def waiting(self) -> list[str]:
        """Waiting sequence ids, the next admitted first (preempted ones in front)."""
        return [s.seq_id for s in self.scheduler.waiting]

    @property
    def n_preemptions(self) -> int:
        return self.scheduler.num_preemptions

    @property
    def done(self) -> bool:
        """All requests arrived and every one finished or was refused, on both allocators."""
        if self.step_index >= MAX_STEPS:
            return True
        return (self.step_index > self._last_arrival and not self.scheduler.has_unfinished
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
        sched = self.scheduler
        # blocks held before the reservations, oldest running first (preemption events)
        held = {s.seq_id: self._n_held(s.seq_id) for s in sched.running}
        out = sched.schedule(float(t))
        self._scheduled(out, held, events)
        sampled: dict[str, int] = {}
        forks: dict[str, list[tuple[Request, int]]] = {}
        if not out.is_empty:
            if out.copies:
                self.runner.cache.copy_blocks([(c.src, c.dst) for c in out.copies])
            chunks = [(sid, sched.seqs[sid].num_computed_tokens, 1) for sid in out.decodes]
            chunks += [(c.seq_id, c.start, c.n_tokens) for c in out.prefills]
            logits = self.runner.forward(chunks)
            sampled, forks = self._sample(out, logits, events)
        held = {sid: self._n_held(sid) for sid in out.sample_ids}
        finished = sched.update(out, sampled, float(t), self.stop_ids, keep_eos=False,
                                forks=forks)
        for children in forks.values():  # the samples forked in this update
            for req, _token in children:
                self.seqs[req.request_id].sched = sched.seqs[req.request_id]
        self._finished(finished, held, events)
        self._contiguous_step(events)
        groups, closed = self._groups()
        record = KVStepRecord(
            step=t, paged=self.blocks.stats(t), contiguous=self.contiguous.stats(t),
            pool=self.blocks.pool_state(), regions=self._regions(),
            contiguous_free=tuple(self.contiguous.free_extents()), seqs=self._seq_steps(),
            events=tuple(events), ran_model=not out.is_empty,
            step_s=time.perf_counter() - t0,
            radix=(radix_tree_state(self.blocks.radix.tree) if self.blocks.radix is not None
                   else None),
            groups=groups, kv_held_closed=closed)
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
            params = SamplingParams(spec.temperature, 0.9, spec.seed * 1000 + sample)
        else:
            params = GREEDY
        info = SeqInfo(seq_id=seq_id, request_id=spec.request_id, color=len(self.seqs),
                       user_text=spec.user, system_text=spec.system,
                       prompt_tokens=len(req.prompt_ids), max_new_tokens=spec.max_new_tokens,
                       temperature=spec.temperature, sample=sample)
        seq = _Seq(info, req, params)
        self.seqs[seq_id] = seq
        return seq

    def _request(self, seq: _Seq) -> Request:
        return Request(seq.info.seq_id, seq.prompt_ids, seq.req.spec.max_new_tokens,
                       arrival_s=float(seq.req.spec.arrival_step), sampling=seq.params)

    def _arrive(self, req: PreparedRequest, events: list[str]) -> None:
        seq = self._new_seq(req, 0)
        sid, spec = seq.info.seq_id, req.spec
        total = len(req.prompt_ids) + spec.max_new_tokens
        samples = f" ×{spec.n_samples} samples" if spec.n_samples > 1 else ""
        if total > self.max_position:  # the scheduler knows the pool, not the model
            seq.message = (f"refused: a request of {total} tokens is longer than the model's "
                           f"context of {self.max_position} tokens; it can never run (prompt "
                           f"{len(req.prompt_ids)} + up to {spec.max_new_tokens} new tokens)")
        else:
            try:
                seq.sched = self.scheduler.add(self._request(seq))
            except RequestRefusedError as exc:  # longer than the whole pool
                seq.message = f"refused: {exc}"
        if seq.sched is None:
            seq.refused, seq.c_status = True, REFUSED
            events.append(f"{sid} {seq.message}")
            return
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

    # ---- 2. what the scheduler did: preemption, copy-on-write, admission ---------------------
    def _scheduled(self, out: SchedulerOutput, held: dict[str, int], events: list[str]) -> None:
        # in the order it happened: each running sequence (oldest first) made room for its
        # next token (preempting the newest) and then copied a shared last block
        preempted_for = defaultdict(list)
        for victim, needer in zip(out.preempted, out.preempted_for, strict=True):
            preempted_for[needer].append(victim)
        copies = defaultdict(list)
        for c in out.copies:
            copies[c.seq_id].append(c)
        for sid in held:
            for victim in preempted_for.get(sid, ()):
                self._preempted(victim, sid, held[victim], events)
            for c in copies.get(sid, ()):
                self.n_cow_copies += 1
                events.append(f"{sid} copy-on-write: its last block {self._block(c.src)} "
                              f"was shared; copied to block {self._block(c.dst)} before adding "
                              "a token")
        bs = self.block_size
        for chunk in out.prefills:
            sid = chunk.seq_id
            seq = self.seqs[sid]
            seq.n_cached, seq.ever_ran = chunk.start, True
            hit = (f", {seq.n_cached} from the prefix cache ({_blocks(seq.n_cached // bs)})"
                   if seq.n_cached else "")
            verb = "re-admitted (recompute)" if seq.sched.preemptions else "admitted"
            events.append(f"{sid} {verb}: {chunk.start + chunk.n_tokens} tokens in "
                          f"{_blocks(self._n_held(sid))}{hit}")
        waiting = self.scheduler.waiting
        if waiting:  # the head waits for blocks (FCFS: the others wait behind it)
            head = self.seqs[waiting[0].seq_id]
            need = self.blocks.blocks_needed(waiting[0].num_tokens)
            self._say_once(head, "wait", events,
                           f"{head.info.seq_id} waits: needs up to {_blocks(need)}, "
                           f"{self.blocks.n_free_blocks} free")

    def _preempted(self, victim: str, needed_by: str, n_blocks: int, events: list[str]) -> None:
        seq = self.seqs[victim]
        seq.said.clear()
        why = "no free block for its next token" if victim == needed_by else \
            f"no free block for {needed_by}'s next token"
        seq.message = f"preempted at step {self.step_index} ({why}): recomputed when re-admitted"
        events.append(f"{victim} preempted ({why}): its {_blocks(n_blocks)} freed; it waits "
                      "and is recomputed later")

    # ---- 4. sampling, forks, finishing ------------------------------------------------------
    def _sample(self, out: SchedulerOutput, logits, events: list[str]
                ) -> tuple[dict[str, int], dict[str, list[tuple[Request, int]]]]:
        """Each sequence's token from its own sampler; a request of n samples forks after its
        prefill: its other n - 1 samples draw their first token from the same logits."""
        row = {sid: i for i, sid in enumerate(out.seq_ids)}
        sampled: dict[str, int] = {}
        forks: dict[str, list[tuple[Request, int]]] = {}
        for sid in out.sample_ids:
            seq = self.seqs[sid]
            row_logits = logits[row[sid]: row[sid] + 1]
            n = seq.req.spec.n_samples
            if n > 1 and not seq.forked:
                seq.forked = True
                children = forks[sid] = []
                for k in range(1, n):
                    child = self._new_seq(seq.req, k)
                    child.forked, child.ever_ran, child.n_cached = True, True, seq.n_cached
                    seq.children.append(child.info.seq_id)
                    children.append((self._request(child), child.sampler(row_logits)[0]))
                events.append(f"{sid} forks into {n} samples: all {_blocks(self._n_held(sid))} "
                              f"shared (ref count {n})")
            sampled[sid] = seq.sampler(row_logits)[0]
        return sampled, forks

    def _finished(self, finished: list[Sequence], held: dict[str, int],
                  events: list[str]) -> None:
        for s in finished:
            seq = self.seqs[s.seq_id]
            seq.message = "end of text" if s.finish_reason == serve.STOP else "length"
            n_blocks = held.get(s.seq_id, held.get(s.parent_id, 0))
            events.append(f"{s.seq_id} finished: {len(seq.outputs)} tokens ({seq.message}); "
                          f"{_blocks(n_blocks)} released")

    # ---- 5. the contiguous baseline ---------------------------------------------------------
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

    # ---- 6. records ----------------------------------------------------------------------------
    def _n_held(self, seq_id: str) -> int:
        """Blocks `seq_id` holds in the pool drawn (a window's dropped entries not counted)."""
        return sum(1 for b in self.blocks.block_table(seq_id) if b >= 0)

    def _block(self, block_id: int) -> str:
        """A copy-on-write block as the events name it: with several layer groups the
        coordinator's group-qualified id is told as (block, group)."""
        blocks = self.blocks
        if not isinstance(blocks, KVCacheCoordinator) or len(blocks.groups) == 1:
            return str(block_id)
        group, block = divmod(block_id, blocks.n_blocks)
        return f"{block} ({blocks.groups[group].name})"

    def _groups(self) -> tuple[tuple[KVGroupStep, ...], float]:
        """Each layer group's blocks and tables, and the closed form's held / kept-everything
        over the same sequences' tokens; ((), 1.0) where the cache keeps one table."""
        blocks = self.blocks
        if not isinstance(blocks, KVCacheCoordinator):
            return (), 1.0
        seq_ids = tuple(blocks.seq_ids)
        tables = [blocks.group_tables(s) for s in seq_ids]
        groups = tuple(
            KVGroupStep(name=h.group.name, window=h.group.window, n_layers=len(h.group.layers),
                        blocks_held=h.blocks_held, blocks_full=h.blocks_full,
                        bytes_per_block=h.bytes_per_block, seq_ids=seq_ids,
                        block_tables=tuple(tuple(t[g]) for t in tables),
                        blocks_used=h.blocks_used)
            for g, h in enumerate(blocks.held()))
        closed = kv_held(self.model.config, [blocks.num_tokens(s) for s in seq_ids], "fp32")
        return groups, closed.ratio

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


def kv_lab_model(settings: dict, device: str = "cpu"):
    """(model, tokenizer) the KV lab runs: the settings' model on their kernel path, its
    cache at `kv_dtype`."""
    model, tokenizer = load_lab_model(settings["model"], device,
                                      kernels=settings.get("kernels", "auto"))
    if settings.get("kv_dtype", "model") != "model":
        model = kv_quantized(model, settings["kv_dtype"])
    return model, tokenizer


def kv_session(settings: dict, model, tokenizer,
               scenario: PreparedScenario | None = None) -> KVLabSession:
    """The KV lab's session on `model` for `settings` (the run's and the window's alike);
    `scenario`: one prepared already (a trace's) instead of the settings' built-in one."""
    return KVLabSession(model, tokenizer, scenario or settings["scenario"],
                        block_size=int(settings["block_size"]),
                        n_blocks=int(settings["n_blocks"]) or None,
                        prefix_cache=settings.get("prefix_cache", "hash"),
                        eviction_policy=settings.get("eviction_policy", "lru"))


def kv_run(settings: dict, device: str = "cpu", max_steps: int | None = None,
           on_step=None, scenario: PreparedScenario | None = None
           ) -> tuple[KVLabSession, list[KVStepRecord]]:
    """Run a KV lab scenario to its end headless: (KVLabSession, records).

    `on_step(record)` is called after each step (progress, trace spans); `scenario` as
    kv_session's.
    """
    session = kv_session(settings, *kv_lab_model(settings, device), scenario)
    records = []
    while not session.done and (max_steps is None or len(records) < max_steps):
        records.append(session.step())
        if on_step is not None:
            on_step(records[-1])
    return session, records


def _blocks(n: int) -> str:
    return f"{n} block" if n == 1 else f"{n} blocks"
