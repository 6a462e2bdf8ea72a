"""The batching lab on requests that share prefixes: every request's cached tokens, the hit
rate, the records' prefix-hit tokens and the LPM admission order, on the simulated clock."""

from __future__ import annotations

import pytest

from inferlab.engines.batchlab.timeline import cached_tokens_by_request, iteration_strips
from inferlab.engines.serve.prefix_workloads import expected_cached_tokens
from inferlab.engines.servelab.section import (
    BATCHING_DEFAULTS,
    BLOCK_SIZE,
    batching_session,
    check_batching_settings,
)


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
    from inferlab.engines.servelab.compare import compare_policies

    runs = compare_policies(dict(BATCHING_DEFAULTS, scenario="few-shot", prefix_cache="radix"),
                            ("static", "continuous"))
    assert [r.policy for r in runs] == ["static", "continuous"]
    assert all(r.metrics["completed"] == 32 and r.metrics["prefix_hit_rate"] > 0.5
               for r in runs)
