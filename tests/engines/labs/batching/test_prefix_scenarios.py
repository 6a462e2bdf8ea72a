"""The batching lab on requests that share prefixes: every request's cached tokens, the hit
rate, the records' prefix-hit tokens and the LPM admission order, on the simulated clock."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.batching.session import BLOCK_SIZE, batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS, check_batching_settings
from inferlab.engines.labs.batching.timeline import (
    cached_tokens_by_request,
    iteration_strips,
    prefix_hit_spans,
    running_prefix_hit_rate,
    timeline_segments,
)
from inferlab.engines.serve.prefix_workloads import expected_cached_tokens


def _run(**settings):
    session = batching_session(dict(BATCHING_DEFAULTS, **settings))
    while not session.done:
        session.step()
    return session


@pytest.mark.parametrize("cache, block", [("radix", 1), ("hash", BLOCK_SIZE)])
def test_doc_qa_requests_cache_what_the_definition_says(cache, block):
    """Doc-QA questions arrive a second apart, long after the one before finished (pool never
    short): each request's cached_tokens is the issue's expected count, in the outputs, the
    records and the hit rate alike."""
    session = _run(scenario="doc-qa", prefix_cache=cache)
    outputs = session.outputs()
    prompts = [w.prompt_token_ids for w in session.items]
    assert [o["cached_tokens"] for o in outputs] == expected_cached_tokens(prompts, block)
    by_record = cached_tokens_by_request(session.records)
    assert {o["request_id"]: o["cached_tokens"] for o in outputs} == {
        r: by_record.get(r, 0) for r in by_record}
    strips = iteration_strips(session.records)
    assert int(strips.cached_tokens.sum()) == sum(o["cached_tokens"] for o in outputs)
    total = sum(len(p) for p in prompts)
    assert session.metrics()["prefix_hit_rate"] == pytest.approx(
        sum(o["cached_tokens"] for o in outputs) / total)
    # the strip's running rate ends at the metric, and never falls below 0 or exceeds 1
    rate = running_prefix_hit_rate(session.request_infos(), session.records)
    assert rate[-1] == pytest.approx(session.metrics()["prefix_hit_rate"])
    assert rate[0] == 0 and ((0 <= rate) & (rate <= 1)).all()
    # the Gantt marks every request that hit, over its first prefill segment
    segments = timeline_segments(session.request_infos(), session.records)
    rows, x0, x1 = prefix_hit_spans(segments, by_record,
                                    {o["request_id"]: o["prompt_tokens"] for o in outputs})
    hit = sorted(segments.row_of[o["request_id"]] for o in outputs if o["cached_tokens"])
    assert sorted(rows.tolist()) == hit and (x1 > x0).all()


def test_without_a_cache_nothing_is_cached():
    session = _run(scenario="few-shot", prefix_cache="none")
    assert all(o["cached_tokens"] == 0 for o in session.outputs())
    assert session.metrics()["prefix_hit_rate"] == 0


def test_settings_name_a_bad_scenario_or_schedule():
    with pytest.raises(ValueError, match="scenario"):
        check_batching_settings(dict(BATCHING_DEFAULTS, scenario="chat"))
    with pytest.raises(ValueError, match="schedule"):
        check_batching_settings(dict(BATCHING_DEFAULTS, schedule="sjf"))


def test_policies_compare_on_the_same_scenario_requests():
    from inferlab.engines.labs.batching.compare import compare_policies

    runs = compare_policies(dict(BATCHING_DEFAULTS, scenario="few-shot", prefix_cache="radix"),
                            ("static", "continuous"))
    assert [r.policy for r in runs] == ["static", "continuous"]
    assert all(r.metrics["completed"] == 32 and r.metrics["prefix_hit_rate"] > 0.5
               for r in runs)


@pytest.mark.parametrize("cache", ["hash", "radix"])
def test_every_eviction_is_recorded_at_its_iteration(cache):
    """Few-shot requests all waiting at once in a pool half the size of their examples: the
    cache evicts, and the records' per-iteration counts add up to the manager's."""
    from inferlab.engines.hardware.presets import load_hardware_preset
    from inferlab.engines.kv.block_manager import BlockManager
    from inferlab.engines.model.config import load_model_preset
    from inferlab.engines.serve.engine import ServingEngine, requests_from_workload
    from inferlab.engines.serve.executors import SimulatedExecutor
    from inferlab.engines.serve.prefix_workloads import few_shot
    from inferlab.engines.serve.scheduler import Scheduler

    cfg, hw = load_model_preset("llama-3-8b"), load_hardware_preset("h100-sxm")
    items = few_shot(0, 48, examples_tokens=256, question_tokens=16, output_tokens=16,
                     n_prefixes=8, rate_per_s=None, vocab_size=cfg.vocab_size)
    blocks = BlockManager(64, 16, prefix_cache=cache)
    engine = ServingEngine(Scheduler("continuous", blocks, 2048, 32), SimulatedExecutor(cfg, hw),
                           requests_from_workload(items, cfg.vocab_size))
    records = engine.run()
    assert sum(r.evicted_blocks for r in records) == blocks.n_evicted_blocks > 0
    assert int(iteration_strips(records).evicted_blocks.sum()) == blocks.n_evicted_blocks
    assert blocks.stats().evictions == blocks.n_evicted_blocks


def test_hit_spans_by_hand():
    """Two requests: r0 misses, r1 hits 30 of its 40 prompt tokens and prefills the rest in
    two chunks, 1.0-1.6 s (one prefill bar): the mark covers the first 3/4 of that bar."""
    from inferlab.engines.serve.records import IterationRecord, PrefillSlice, RequestInfo

    def it(i, a, b, prefills, decodes=(), finished=()):
        return IterationRecord(i, "continuous", "simulated", a, b, tuple(prefills),
                               tuple(decodes), (), tuple(finished), 1, 10, 0, 1)

    requests = [RequestInfo("r0", 0.0, 8, 1), RequestInfo("r1", 1.0, 40, 1)]
    records = [it(0, 0.0, 0.5, [PrefillSlice("r0", 0, 8)], finished=["r0"]),
               it(1, 1.0, 1.4, [PrefillSlice("r1", 30, 6, cached=30)]),
               it(2, 1.4, 1.6, [PrefillSlice("r1", 36, 4)], finished=["r1"])]
    segments = timeline_segments(requests, records)
    cached = cached_tokens_by_request(records)
    assert cached == {"r0": 0, "r1": 30}
    rows, x0, x1 = prefix_hit_spans(segments, cached, {"r0": 8, "r1": 40})
    assert rows.tolist() == [1]
    assert x0.tolist() == pytest.approx([1.0]) and x1.tolist() == pytest.approx([1.45])
    assert running_prefix_hit_rate(requests, records).tolist() == pytest.approx(
        [0.0, 30 / 48, 30 / 48])
