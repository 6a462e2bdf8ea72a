"""Token times read back from the iteration records equal the scheduler's own: exactly, for
chunked prefills, recompute preemptions and prefix hits, and the lab's metrics summarized
from them equal the metrics the run wrote."""

from __future__ import annotations

import dataclasses

import pytest

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.kv import BlockManager
from inferlab.engines.labs.batching.replay_timings import request_timings
from inferlab.engines.labs.batching.section import batching_section, read_batching_section
from inferlab.engines.labs.batching.session import batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import ServingEngine, requests_from_workload
from inferlab.engines.serve.executors import SimulatedExecutor
from inferlab.engines.serve.metrics import summarize
from inferlab.engines.serve.scenarios import settings_slo
from inferlab.engines.serve.scheduler import Scheduler
from inferlab.engines.serve.workload import WorkloadRequest


def small_pool_run(policy: str, budget: int, prefix_cache: str = "none"):
    """Six requests through a pool of 8 blocks of 8 tokens: they preempt each other."""
    items = [WorkloadRequest(arrival_s=0.01 * i, prompt_tokens=20 + 3 * i,
                             output_tokens=12 + i) for i in range(6)]
    blocks = BlockManager(8, 8, prefix_cache=prefix_cache)
    scheduler = Scheduler(policy, blocks, max_num_batched_tokens=budget)
    executor = SimulatedExecutor(load_model_preset("llama-3-8b"),
                                 load_hardware_preset("h100-sxm"))
    engine = ServingEngine(scheduler, executor, requests_from_workload(items, 1000))
    return engine, engine.run()


@pytest.mark.parametrize(("policy", "budget", "prefix_cache"),
                         [("continuous", 8, "none"), ("continuous", 8, "hash"),
                          ("continuous-no-chunking", 64, "none"), ("static", 64, "none")])
def test_token_times_are_the_schedulers(policy, budget, prefix_cache):
    engine, records = small_pool_run(policy, budget, prefix_cache)
    if policy != "static":
        assert sum(len(r.preempted) for r in records) > 0  # re-prefills are read back too
    got = request_timings(engine.request_infos(), records)
    want = engine.timings()
    assert [t.token_times_s for t in got] == [t.token_times_s for t in want]
    assert [(t.arrival_s, t.prompt_tokens) for t in got] == \
        [(t.arrival_s, t.prompt_tokens) for t in want]


def test_a_snapshots_timings_summarize_to_its_own_metrics():
    settings = dict(BATCHING_DEFAULTS, requests=30, rate_per_s=50.0)
    session = batching_session(settings)
    while not session.done:
        session.step()
    section = batching_section(session.settings, session.request_infos(), session.records,
                               session.serving_metrics())
    snapshot = read_batching_section(section)
    summary = summarize(request_timings(snapshot.requests, snapshot.iterations),
                        slo=settings_slo(snapshot.settings))
    assert summary.to_dict() == {k: snapshot.metrics[k] for k in summary.to_dict()}


def test_kept_iterations_with_gaps_or_unknown_requests_are_refused():
    engine, records = small_pool_run("continuous", 8)
    with pytest.raises(ValueError, match="kept only some of the run's iterations"):
        request_timings(engine.request_infos(), records[::2])
    stranger = dataclasses.replace(records[3], decodes=("nobody",))
    with pytest.raises(ValueError, match="iteration 3 names request 'nobody'"):
        request_timings(engine.request_infos(), [*records[:3], stranger])
