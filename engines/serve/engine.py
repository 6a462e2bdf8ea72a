"""`ServingEngine`: the serving loop over a Scheduler and an executor, one iteration a step.

    admit the requests that have arrived     (scheduler.add; idle: jump to the next arrival)
    out = scheduler.schedule(now)            (the batch, its KV slots reserved)
    sampled, forward_s, sample_s = executor.execute(out, seqs)   (the model, or the roofline)
    scheduler.update(out, sampled, token time, eos_id)   (tokens out, finished sequences freed)

Each step hands out an IterationRecord on the executor's clock ("wall" or "simulated", see
executors.py); `timings()` feeds metrics.summarize, `request_infos()` the batching lab. On the
wall clock the scheduler's own time is part of the iteration, as it is in a real server:
an iteration is [host work: the previous update and this schedule, measured] + forward +
sample, and its tokens come out at its end. On the simulated clock only the batch is timed (and
schedule_s is 0, so that a simulated run is the same record for record every time).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve import workload
from inferlab.engines.serve.executors import SimulatedExecutor, simulated_pool_blocks
from inferlab.engines.serve.metrics import RequestTiming, summarize
from inferlab.engines.serve.records import IterationRecord, PrefillSlice, RequestInfo
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scheduler import RequestRefusedError, Scheduler
from inferlab.engines.serve.workload import WorkloadRequest, prompt_token_ids_for

DEFAULT_MAX_ITERATIONS = 10_000_000


class ServingEngine:
    """Runs `requests` (each at its arrival_s on the run's clock) through `scheduler` on
    `executor`. Every request is checked against the scheduler's refusals before anything
    runs: one that can never fit raises the scheduler's RequestRefusedError here."""

    def __init__(self, scheduler: Scheduler, executor, requests: Iterable[Request],
                 eos_id: int | None = None, *, accepting: bool = False) -> None:
        self.scheduler = scheduler
        self.executor = executor
        self.requests = sorted(requests, key=lambda r: r.arrival_s)
        self.eos_id = eos_id
        self.now_s = 0.0
        self.records: list[IterationRecord] = []
        self._next = 0  # index of the next request to arrive
        self._update_s = 0.0  # the scheduler's update after the latest forward, wall seconds
        self.accepting = accepting
        """More requests may come through `submit` (a router's instance): arrivals stay open
        until `stop_accepting`."""
        check_admissible(scheduler, self.requests, getattr(executor, "max_tokens", None))

    def submit(self, request: Request) -> None:
        """One more request, arriving no earlier than the latest one submitted (a router
        sends them in arrival order). The sender checks them first, all at once, with
        `check_admissible` (a probe scheduler per request would cost a pool each)."""
        if not self.accepting:
            raise RuntimeError("this engine takes no more requests")
        if self.requests and request.arrival_s < self.requests[-1].arrival_s:
            raise ValueError(f"request {request.request_id!r} arrives at {request.arrival_s} "
                             f"s, before the latest one ({self.requests[-1].arrival_s} s)")
        self.requests.append(request)

    def stop_accepting(self) -> None:
        """No more `submit`: once the submitted requests are admitted, arrivals close."""
        self.accepting = False

    @property
    def next_step_s(self) -> float | None:
        """When the next `step` would start on the run's clock (an idle engine jumps to its
        next arrival); None when it has nothing left to run."""
        if self.scheduler.has_unfinished:
            return self.now_s
        if self._next < len(self.requests):
            return max(self.now_s, self.requests[self._next].arrival_s)
        return None

    @property
    def done(self) -> bool:
        return self._next == len(self.requests) and not self.scheduler.has_unfinished

    def step(self) -> IterationRecord | None:
        """One iteration; None when nothing could run (the clock then moved on to the next
        arrival or static timeout)."""
        sched = self.scheduler
        if not sched.has_unfinished and self._next < len(self.requests):
            self.now_s = max(self.now_s, self.requests[self._next].arrival_s)
        self._admit()
        on_wall = self.executor.clock == "wall"
        start_s = self.now_s
        evicted_before = sched.blocks.n_evicted_blocks
        t0 = time.perf_counter()
        out = sched.schedule(start_s)
        # host time between two forwards: the last iteration's update and this schedule
        schedule_s = self._update_s + time.perf_counter() - t0
        self._update_s = 0.0
        if out.is_empty:
            sched.update(out, {}, start_s, self.eos_id)
            if on_wall:
                self.now_s += schedule_s
            self._wait()
            return None
        sampled, forward_s, sample_s = self.executor.execute(out, sched.seqs)
        self.now_s = start_s + forward_s + sample_s + (schedule_s if on_wall else 0.0)
        t1 = time.perf_counter()
        finished = sched.update(out, sampled, self.now_s, self.eos_id)
        self._update_s = time.perf_counter() - t1  # counted in the next iteration
        cached = out.cached_tokens or {}
        record = IterationRecord.from_engine(
            index=len(self.records), policy=sched.policy, clock=self.executor.clock,
            start_s=float(start_s), end_s=float(self.now_s),
            prefills=tuple(PrefillSlice.from_engine(*c, cached.get(c.seq_id, 0))
                           for c in out.prefills),
            decodes=_as_tuple(out.decodes), preempted=_as_tuple(out.preempted),
            finished=tuple(s.seq_id for s in finished),
            kv_used_blocks=sched.kv_used_blocks, kv_total_blocks=sched.blocks.n_blocks,
            waiting=len(sched.waiting_seqs), running=len(sched.running_seqs),
            schedule_s=schedule_s if on_wall else 0.0, forward_s=float(forward_s),
            sample_s=float(sample_s), evicted_blocks=sched.blocks.n_evicted_blocks - evicted_before)
        self.records.append(record)
        return record

    def run(self, max_iterations: int = DEFAULT_MAX_ITERATIONS) -> list[IterationRecord]:
        """Step until every request finished; the records of every iteration."""
        for _ in range(max_iterations):
            if self.done:
                return self.records
            self.step()
        if not self.done:
            raise RuntimeError(f"not done after {max_iterations} iterations")
        return self.records

    def timings(self) -> list[RequestTiming]:
        """Each request's arrival and token times, in arrival order (for metrics.summarize)."""
        seqs = self.scheduler.seqs
        out = []
        for r in self.requests:
            seq = seqs.get(r.request_id)
            out.append(RequestTiming(r.arrival_s, tuple(seq.token_times_s) if seq else (),
                                     len(r.prompt_ids), ok=bool(seq and seq.is_finished)))
        return out

    def request_infos(self) -> list[RequestInfo]:
        return [RequestInfo(r.request_id, r.arrival_s, len(r.prompt_ids), r.max_new_tokens)
                for r in self.requests]

    # ---- arrivals and idle time ------------------------------------------------------------------
    def _admit(self) -> None:
        reqs, sched = self.requests, self.scheduler
        while self._next < len(reqs) and reqs[self._next].arrival_s <= self.now_s:
            sched.add(reqs[self._next])
            self._next += 1
        if self._next == len(reqs) and not sched.arrivals_closed and not self.accepting:
            sched.close_arrivals()

    def _wait(self) -> None:
        """Nothing could run: move the clock to the next event (an arrival, or the oldest
        waiting request's static timeout)."""
        sched = self.scheduler
        events = []
        if self._next < len(self.requests):
            events.append(self.requests[self._next].arrival_s)
        if sched.waiting and sched.static_timeout_s is not None:
            events.append(sched.waiting[0].request.arrival_s + sched.static_timeout_s)
        events = [t for t in events if t > self.now_s]
        if not events:
            if sched.has_unfinished:
                raise RuntimeError(f"the scheduler runs nothing at {self.now_s:g} s and no "
                                   "arrival or timeout is left to wait for")
            return
        self.now_s = min(events)


def _as_tuple(ids) -> tuple:
    return ids if type(ids) is tuple else tuple(ids)


def check_admissible(scheduler: Scheduler, requests: list[Request],
                      max_tokens: int | None = None) -> None:
    """Submit every request to a scheduler of the same policy, budget and pool size (empty):
    its `add` raises what the real one would at arrival. A real model also refuses a request
    longer than its context (`max_tokens`)."""
    if max_tokens is not None:
        for r in requests:
            total = len(r.prompt_ids) + r.max_new_tokens
            if total > max_tokens:
                raise RequestRefusedError(
                    f"request {r.request_id!r}: prompt {len(r.prompt_ids)} + max_new_tokens "
                    f"{r.max_new_tokens} = {total} tokens, longer than the model's context "
                    f"of {max_tokens}; it can never run")
    probe = Scheduler(scheduler.policy,
                      BlockManager(scheduler.blocks.n_blocks, scheduler.block_size, False),
                      scheduler.max_num_batched_tokens, scheduler.max_num_seqs,
                      scheduler.static_batch_size, scheduler.static_timeout_s)
    for r in requests:
        probe.add(r)


def requests_from_workload(items: Iterable[WorkloadRequest], vocab_size: int,
                           id_prefix: str = "r", *,
                           shared_prefix_tokens: int = 0) -> list[Request]:
    """Requests with max_new_tokens = output_tokens, arriving when the workload says. Their
    prompts are workload.prompt_token_ids_for's: an item's prompt_token_ids verbatim (each
    below vocab_size, else WorkloadError), else made-up ids, distinct per request except the
    first shared_prefix_tokens of requests with the same prefix_id."""
    items = list(items)
    prompts = prompt_token_ids_for(items, vocab_size, shared_prefix_tokens)
    return [Request(f"{id_prefix}{i}", prompt, w.output_tokens, w.arrival_s)
            for i, (w, prompt) in enumerate(zip(items, prompts, strict=True))]


def bench_simulator(n_requests: int = 5000, model: str = "llama-3-8b",
                    hardware: str = "h100-sxm", rate_per_s: float = 50.0) -> dict:
    """Run `n_requests` of `model` on `hardware` through the continuous scheduler on the
    simulated clock; how many simulated requests the simulator gets through per wall second."""
    cfg, preset = load_model_preset(model), load_hardware_preset(hardware)
    stream = workload.generate(workload.Workload(
        n_requests, rate_per_s=rate_per_s, prompt_len=workload.LengthDist.lognormal(6.0, 0.5),
        output_len=workload.LengthDist.lognormal(5.0, 0.5)))
    requests = requests_from_workload(stream, cfg.vocab_size)
    blocks = BlockManager(simulated_pool_blocks(cfg, preset), 16, enable_prefix_caching=False)
    engine = ServingEngine(Scheduler("continuous", blocks, max_num_batched_tokens=2048,
                                     max_num_seqs=256),
                           SimulatedExecutor(cfg, preset), requests)
    t0 = time.perf_counter()
    records = engine.run()
    wall_s = time.perf_counter() - t0
    metrics = summarize(engine.timings())
    return {"requests": n_requests, "iterations": len(records), "wall_s": wall_s,
            "simulated_s": engine.now_s, "requests_per_wall_s": n_requests / wall_s,
            "output_tokens_per_simulated_s": metrics.output_tokens_per_s}

