"""The serving engine: the simulated clock on Llama-3-8B, the real tiny model on the wall clock."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.kv import BlockManager
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.sampler import SamplingParams
from inferlab.engines.roofline.costs import decode_step_cost, prefill_step_cost
from inferlab.engines.roofline.memory import kv_bytes_per_token, weight_bytes
from inferlab.engines.serve import workload
from inferlab.engines.serve.engine import ServingEngine, requests_from_workload
from inferlab.engines.serve.executors import (
    ModelExecutor,
    SimulatedExecutor,
    mixed_step_cost,
    simulated_pool_blocks,
)
from inferlab.engines.serve.metrics import e2e_s, summarize, ttft_s
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scheduler import (
    CONTINUOUS,
    STATIC,
    RequestRefusedError,
    SampledTokens,
    Scheduler,
)
from tests import torch_fixtures

# torch on one thread and the seeded tiny model (this package has no conftest of its own)
_one_torch_thread, tiny = torch_fixtures._one_torch_thread, torch_fixtures.tiny

# ---- the simulated clock ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama8b():
    return load_model_preset("llama-3-8b"), load_hardware_preset("h100-sxm")


def test_pool_is_what_fits_beside_the_weights(llama8b):
    cfg, h100 = llama8b
    free = int(80e9 * 0.9) - weight_bytes(cfg, "fp16")
    assert simulated_pool_blocks(cfg, h100, 16) == free // kv_bytes_per_token(cfg) // 16
    with pytest.raises(ValueError, match="leave no KV block"):
        simulated_pool_blocks(load_model_preset("llama-3-70b"), load_hardware_preset("l4"))


def test_mixed_step_cost_reduces_to_the_roofline_step_costs(llama8b):
    cfg, _ = llama8b
    dec, ref = mixed_step_cost(cfg, [], [300] * 8), decode_step_cost(cfg, 8, 300)
    assert dec.flops == pytest.approx(ref.flops) and dec.bytes_moved == pytest.approx(
        ref.bytes_moved)
    pre, ref = mixed_step_cost(cfg, [(0, 512)], []), prefill_step_cost(cfg, 512)
    assert pre.flops == pytest.approx(ref.flops) and pre.bytes_moved == pytest.approx(
        ref.bytes_moved)
    # a later chunk attends to the cached prefix too
    assert mixed_step_cost(cfg, [(512, 512)], []).flops > pre.flops


def test_500_requests_of_llama_3_8b_on_h100_run_to_the_end(llama8b):
    cfg, h100 = llama8b
    stream = workload.generate(workload.Workload(
        500, rate_per_s=50.0, prompt_len=workload.LengthDist.lognormal(6.0, 0.5),
        output_len=workload.LengthDist.lognormal(4.5, 0.5), seed=1))
    requests = requests_from_workload(stream, cfg.vocab_size)
    blocks = BlockManager(simulated_pool_blocks(cfg, h100), 16, enable_prefix_caching=False)
    sched = Scheduler(CONTINUOUS, blocks, max_num_batched_tokens=2048, max_num_seqs=256)
    engine = ServingEngine(sched, SimulatedExecutor(cfg, h100), requests)
    records = engine.run()
    assert engine.done and all(r.clock == "simulated" for r in records)
    assert all(r.end_s > r.start_s for r in records)
    assert all(a.end_s <= b.start_s for a, b in zip(records, records[1:], strict=False))
    metrics = summarize(engine.timings())
    assert metrics.completed == 500 and metrics.failed == 0
    assert metrics.total_output_tokens == sum(w.output_tokens for w in stream)
    assert sum(len(r.finished) for r in records) == 500
    assert blocks.n_free_blocks == blocks.n_blocks and not blocks.seq_ids
    assert [i.request_id for i in engine.request_infos()] == [r.request_id for r in requests]


def test_a_request_that_can_never_fit_is_refused_before_anything_runs():
    class Never:
        clock = "simulated"

        def execute(self, out, seqs):
            raise AssertionError("nothing may run")

    sched = Scheduler(CONTINUOUS, BlockManager(4, 4))  # 16 tokens
    ok, big = Request("ok", [1, 2, 3], 2), Request("big", list(range(10)), 8, arrival_s=5.0)
    with pytest.raises(RequestRefusedError, match="18 tokens needs 5 KV blocks"):
        ServingEngine(sched, Never(), [ok, big])
    assert not sched.seqs


# ---- the real model ------------------------------------------------------------------------------


def prompts() -> list[list[int]]:
    lengths = [5, 19, 9, 30, 13, 7]
    return [[(11 * i + 5 * j + 1) % 256 for j in range(n)] for i, n in enumerate(lengths)]


def make_requests(sampling: dict[int, SamplingParams] | None = None) -> list[Request]:
    sampling = sampling or {}
    return [Request(f"q{i}", p, 8 + i % 3, **({"sampling": sampling[i]} if i in sampling else {}))
            for i, p in enumerate(prompts())]


def nocache_greedy(model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(model.forward_nocache(torch.tensor(ids)).argmax()))
    return ids[len(prompt):]


def model_engine(model, requests, policy=CONTINUOUS, n_blocks=64, block_size=4, budget=256,
                 prefix=False, executor=None, **kw):
    runner = ModelRunner(model, n_blocks=n_blocks, block_size=block_size,
                         enable_prefix_caching=prefix)
    sched = Scheduler(policy, runner.blocks, max_num_batched_tokens=budget, **kw)
    return ServingEngine(sched, executor or ModelExecutor(runner), requests), runner


def outputs(engine) -> dict[str, list[int]]:
    return {sid: seq.output_ids for sid, seq in engine.scheduler.seqs.items()}


@pytest.fixture(scope="module")
def reference(tiny):
    model, _ = tiny
    return {r.request_id: nocache_greedy(model, list(r.prompt_ids), r.max_new_tokens)
            for r in make_requests()}


@pytest.mark.parametrize("case", ["alone", "static", "continuous", "chunked+preempted",
                                  "prefix-cache+preempted"])
def test_greedy_outputs_are_identical_however_the_requests_are_batched(tiny, reference, case):
    model, _ = tiny
    requests = make_requests()
    if case == "alone":
        got = {}
        for r in requests:
            engine, _ = model_engine(model, [r])
            engine.run()
            got |= outputs(engine)
        assert got == reference
        return
    kw = {"static": dict(policy=STATIC, static_batch_size=3),
          "continuous": {},
          "chunked+preempted": dict(n_blocks=12, budget=8),
          "prefix-cache+preempted": dict(n_blocks=12, budget=8, prefix=True)}[case]
    engine, runner = model_engine(model, requests, **kw)
    records = engine.run()
    assert outputs(engine) == reference
    assert all(r.clock == "wall" for r in records)
    if "preempted" in case:
        assert sum(len(r.preempted) for r in records) > 0
        assert any(p.start > 0 for r in records for p in r.prefills)  # chunked
        assert all(r.prefill_tokens + r.decode_tokens <= 8 for r in records)
    if case == "prefix-cache+preempted":  # a re-prefill found its own blocks still cached
        assert runner.blocks.prefix_hit_tokens > 0
    if case == "static":
        assert max(r.batch_size for r in records) == 3
    assert runner.blocks.n_free_blocks == runner.blocks.n_blocks
    assert not runner.blocks.seq_ids


def test_seeded_sampling_does_not_depend_on_the_batch(tiny):
    model, _ = tiny
    sampling = {1: SamplingParams(temperature=0.8, seed=3), 3: SamplingParams(0.7, 0.9, 5)}
    requests = make_requests(sampling)
    alone = {}
    for i in sampling:
        engine, _ = model_engine(model, [requests[i]])
        engine.run()
        alone |= outputs(engine)
    engine, _ = model_engine(model, requests, n_blocks=12, budget=8)
    records = engine.run()
    assert sum(len(r.preempted) for r in records) > 0
    got = outputs(engine)
    assert {sid: got[sid] for sid in alone} == alone


def test_the_executors_hand_over_python_ints_for_their_batch(tiny, llama8b):
    """SampledTokens made from the output's own sample ids (what update takes as they are),
    python ints, greedy and sampled, real and simulated."""
    model, _ = tiny
    requests = make_requests({1: SamplingParams(temperature=0.8, seed=3)})
    engine, _ = model_engine(model, requests)
    cfg, h100 = llama8b
    simulated = ServingEngine(Scheduler(CONTINUOUS, BlockManager(64, 4, False), 256),
                              SimulatedExecutor(cfg, h100, token_id=np.int64(3)), make_requests())
    for eng in (engine, simulated):
        sched = eng.scheduler
        for r in eng.requests:
            sched.add(r)
        for t in range(3):
            out = sched.schedule(float(t))
            sampled = eng.executor.execute(out, sched.seqs)[0]
            assert type(sampled) is SampledTokens and sampled.ids is out.sample_ids
            assert all(type(token) is int for token in sampled.tokens)
            sched.update(out, sampled, float(t))


def test_timings_are_consistent_with_the_records(tiny):
    model, _ = tiny
    requests = make_requests()
    engine, _ = model_engine(model, requests, n_blocks=12, budget=8)
    records = engine.run()
    timings = engine.timings()
    for r, t in zip(requests, timings, strict=True):
        assert t.output_tokens == r.max_new_tokens and t.prompt_tokens == len(r.prompt_ids)
        assert 0 <= ttft_s(t) <= e2e_s(t)
    metrics = summarize(timings)
    assert metrics.completed == len(requests)
    assert metrics.total_output_tokens == sum(r.max_new_tokens for r in requests)
    assert {s for t in timings for s in t.token_times_s} <= {r.end_s for r in records}
    ends = {sid: r.end_s for r in records for sid in r.finished}
    assert {r.request_id: t.token_times_s[-1] for r, t in zip(requests, timings,
                                                                strict=True)} == ends


class Replay:
    """A fake executor: a simulated clock fed the recorded iteration times, a fixed token."""

    clock = "simulated"

    def __init__(self, durations):
        self.durations = iter(durations)

    def execute(self, out, seqs):
        return {sid: 0 for sid in out.sample_ids}, next(self.durations), 0.0


def test_the_schedule_depends_on_the_iteration_times_not_on_the_executor(tiny):
    model, _ = tiny
    requests = make_requests()
    wall, _ = model_engine(model, requests, n_blocks=12, budget=8)
    recorded = wall.run()
    replay, _ = model_engine(model, requests, n_blocks=12, budget=8,
                             executor=Replay([r.duration_s for r in recorded]))
    replayed = replay.run()
    assert len(replayed) == len(recorded)
    for a, b in zip(recorded, replayed, strict=True):
        assert dataclasses.replace(b, clock="wall", start_s=a.start_s, end_s=a.end_s,
                                   schedule_s=a.schedule_s, forward_s=a.forward_s,
                                   sample_s=a.sample_s) == a
        assert b.start_s == pytest.approx(a.start_s) and b.end_s == pytest.approx(a.end_s)


def test_idle_engine_jumps_to_the_next_arrival_and_static_timeout():
    sched = Scheduler(STATIC, BlockManager(64, 4), static_batch_size=4, static_timeout_s=0.5)
    late = [Request("a", [1, 2], 2, arrival_s=2.0), Request("b", [3, 4], 2, arrival_s=10.0)]
    engine = ServingEngine(sched, Replay([0.1] * 10), late)
    records = engine.run()
    assert records[0].start_s == pytest.approx(2.5)  # arrival 2.0 + the static timeout
    assert [r.request_id for r in engine.request_infos()] == ["a", "b"]
    # the last arrival closes arrivals: its batch starts at once, not after the timeout
    assert records[-2].start_s == 10.0 and records[-1].finished == ("b",)


def test_an_iteration_accounts_for_its_time_on_each_clock(tiny):
    """Wall: the scheduler's host time is inside the iteration (schedule + forward + sample =
    its span; iterations follow each other with no gap). Simulated: the span is the
    roofline's forward alone (no host time: the same records every run)."""
    model, _ = tiny
    wall, _ = model_engine(model, make_requests(), n_blocks=12, budget=8)
    records = wall.run()
    for r in records:
        assert r.schedule_s > 0 and r.forward_s > 0 and r.sample_s >= 0
        assert r.schedule_s + r.forward_s + r.sample_s == pytest.approx(r.duration_s)
    assert all(a.end_s == b.start_s for a, b in zip(records, records[1:], strict=False))  # all at t=0

    from inferlab.engines.model.config import load_model_preset
    from inferlab.engines.serve.executors import SimulatedExecutor

    sim = ServingEngine(Scheduler(CONTINUOUS, BlockManager(64, 4), 8),
                        SimulatedExecutor(load_model_preset("llama-3-8b"), (1e15, 3e12)),
                        make_requests())
    for r in sim.run():
        assert r.duration_s == pytest.approx(r.forward_s) and r.sample_s == r.schedule_s == 0


def test_a_real_model_refuses_a_request_longer_than_its_context(tiny):
    model, _ = tiny
    limit = model.config.max_position
    long = Request("long", [1] * (limit - 2), 3)
    with pytest.raises(RequestRefusedError, match=f"longer than the model's context of {limit}"):
        model_engine(model, [long], n_blocks=-(-(limit + 8) // 4), budget=limit)


def test_the_batch_carries_its_decodes_summed_context():
    """What the cost model reads instead of looking every decoding sequence up."""
    sched = Scheduler(CONTINUOUS, BlockManager(64, 4), 64)
    for i, n in enumerate((3, 5, 9)):
        sched.add(Request(f"s{i}", list(range(1, n + 1)), 4))
    out = sched.schedule(0.0)
    assert out.decode_context_tokens == 0 and len(out.prefills) == 3
    sched.update(out, dict.fromkeys(out.sample_ids, 7), 1.0)
    out = sched.schedule(1.0)
    assert out.decode_context_tokens == sum(sched.seqs[s].num_tokens for s in out.decodes)
    assert out.decode_context_tokens == (3 + 1) + (5 + 1) + (9 + 1)
