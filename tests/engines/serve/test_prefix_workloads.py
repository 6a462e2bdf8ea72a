"""Seeded scenarios with shared content: each one's sharing worked by hand, determinism, and the
L_i reference against a brute-force one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.serve.prefix_workloads import (
    DEFAULT_VOCAB_SIZE,
    SCENARIOS,
    agent,
    doc_qa,
    expected_cached_tokens,
    few_shot,
    longest_prefix_matches,
    make_scenario,
    multi_turn,
    parallel,
)
from inferlab.engines.serve.workload import WorkloadError, WorkloadRequest

SEED = 7


def ids(r: WorkloadRequest) -> tuple[int, ...]:
    return r.prompt_token_ids


def matches(reqs) -> list[int]:
    return longest_prefix_matches([ids(r) for r in reqs])


def brute_force(prompts) -> list[int]:
    def lcp(a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n
    return [max((lcp(p, q) for q in prompts[:i]), default=0) for i, p in enumerate(prompts)]


def check_common(reqs, vocab_size=DEFAULT_VOCAB_SIZE):
    assert all(isinstance(r, WorkloadRequest) and r.prompt_token_ids for r in reqs)
    assert all(r.prompt_tokens == len(r.prompt_token_ids) for r in reqs)
    assert all(0 < t < vocab_size for r in reqs for t in ids(r))
    assert [r.arrival_s for r in reqs] == sorted(r.arrival_s for r in reqs)


# ---- multi-turn -------------------------------------------------------------------------

def test_multi_turn_each_turn_is_the_previous_prompt_its_answer_and_a_question():
    reqs = multi_turn(SEED, n=3, turns=3, system_tokens=20, question_tokens=10,
                      answer_tokens=6, jitter=0.0, turn_gap_s=100.0, rate_per_s=1.0)
    check_common(reqs)
    assert len(reqs) == 9
    by_conv = {c: [r for r in reqs if r.prefix_id == c] for c in range(3)}
    system = ids(by_conv[0][0])[:20]
    for conv in by_conv.values():
        t1, t2, t3 = conv
        assert [r.prompt_tokens for r in conv] == [30, 46, 62]  # + answer 6 + question 10
        assert all(r.output_tokens == 6 for r in conv)
        assert ids(t1)[:20] == system  # one system prompt for every conversation
        assert ids(t2)[:30] == ids(t1)  # turn 2 starts with turn 1's prompt exactly
        assert ids(t3)[:46] == ids(t2)
        assert t2.arrival_s == t1.arrival_s + 100.0 and t3.arrival_s == t1.arrival_s + 200.0
    # the answer in turn 2's prompt is its own: no other conversation's prompt holds it
    answers = {ids(c[1])[30:36] for c in by_conv.values()}
    assert len(answers) == 3
    firsts = [c[0] for c in by_conv.values()]
    expected = {id(firsts[0]): 0, id(firsts[1]): 20, id(firsts[2]): 20}
    expected |= {id(c[1]): 30 for c in by_conv.values()}
    expected |= {id(c[2]): 46 for c in by_conv.values()}
    assert matches(reqs) == [expected[id(r)] for r in reqs]


def test_multi_turn_without_a_system_prompt_shares_only_within_a_conversation():
    reqs = multi_turn(SEED, n=4, turns=2, system_tokens=0, question_tokens=8,
                      answer_tokens=5, jitter=0.0, rate_per_s=None)
    assert [r.arrival_s for r in reqs] == [0.0] * 4 + [8.0] * 4  # all first turns at t = 0
    assert matches(reqs) == [0] * 4 + [8] * 4


# ---- agent ------------------------------------------------------------------------------

def test_agent_appends_its_call_and_the_tool_result_each_step():
    reqs = agent(SEED, n=2, steps=3, tools_tokens=40, task_tokens=12, call_tokens=4,
                 result_tokens=9, jitter=0.0, step_gap_s=50.0, rate_per_s=0.1)
    check_common(reqs)
    a = [r for r in reqs if r.prefix_id == 0]
    b = [r for r in reqs if r.prefix_id == 1]
    assert [r.prompt_tokens for r in a] == [52, 65, 78]
    assert all(r.output_tokens == 4 for r in reqs)
    assert ids(a[1])[:52] == ids(a[0]) and ids(a[2])[:65] == ids(a[1])
    assert ids(b[0])[:40] == ids(a[0])[:40] and ids(b[0])[40] != ids(a[0])[40]
    want = {id(a[0]): 0, id(b[0]): 40, id(a[1]): 52, id(b[1]): 52, id(a[2]): 65, id(b[2]): 65}
    assert matches(reqs) == [want[id(r)] for r in reqs]


# ---- few-shot and document QA -----------------------------------------------------------

def test_few_shot_shares_exactly_the_examples_block():
    reqs = few_shot(SEED, n=12, examples_tokens=100, question_tokens=7, output_tokens=3,
                    n_prefixes=2, jitter=0.0)
    check_common(reqs)
    assert {r.prefix_id for r in reqs} == {0, 1}
    assert all(r.prompt_tokens == 107 and r.output_tokens == 3 for r in reqs)
    block = {r.prefix_id: ids(r)[:100] for r in reqs}
    assert block[0][0] != block[1][0]
    seen, want = set(), []
    for r in reqs:
        assert ids(r)[:100] == block[r.prefix_id]
        want.append(100 if r.prefix_id in seen else 0)
        seen.add(r.prefix_id)
    assert matches(reqs) == want


def test_doc_qa_one_long_document_then_questions():
    reqs = doc_qa(SEED, n=5, document_tokens=700, question_tokens=20, jitter=0.25)
    check_common(reqs)
    lengths = [r.prompt_tokens for r in reqs]
    L = matches(reqs)
    doc_len = L[1]
    assert 525 <= doc_len <= 875  # the document's length is drawn once, in 700·(1 ± 0.25)
    assert L == [0] + [doc_len] * 4
    assert all(15 <= n - doc_len <= 25 for n in lengths)
    assert len({ids(r)[doc_len:] for r in reqs}) == 5


# ---- parallel ---------------------------------------------------------------------------

def test_parallel_branches_arrive_together_and_share_the_prefix():
    reqs = parallel(SEED, n=3, branches=4, prefix_tokens=50, branch_tokens=5, jitter=0.0)
    check_common(reqs)
    for g in range(3):
        group = [r for r in reqs if r.prefix_id == g]
        assert len(group) == 4 and len({r.arrival_s for r in group}) == 1
        assert len({ids(r)[:50] for r in group}) == 1
        assert len({ids(r)[50:] for r in group}) == 4
    assert matches(reqs) == [0, 50, 50, 50] * 3


def test_parallel_branches_can_be_spread_out():
    reqs = parallel(SEED, n=2, branches=3, prefix_tokens=40, branch_tokens=4, jitter=0.0,
                    rate_per_s=None, branch_gap_s=10.0)
    assert [(r.arrival_s, r.prefix_id) for r in reqs] == [
        (0.0, 0), (0.0, 1), (10.0, 0), (10.0, 1), (20.0, 0), (20.0, 1)]
    assert matches(reqs) == [0, 0, 40, 40, 40, 40]


def test_parallel_sampling_gives_identical_prompts():
    reqs = parallel(SEED, n=2, branches=3, prefix_tokens=32, branch_tokens=0, jitter=0.0)
    assert [r.prompt_tokens for r in reqs] == [32] * 6
    assert matches(reqs) == [0, 32, 32, 0, 32, 32]
    # the last token is computed: 31 cached at token granularity, one whole block of 16
    assert expected_cached_tokens([ids(r) for r in reqs]) == [0, 31, 31, 0, 31, 31]
    assert expected_cached_tokens([ids(r) for r in reqs], 16) == [0, 16, 16, 0, 16, 16]


# ---- every scenario ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenarios_are_deterministic_by_seed_and_fit_a_2048_context(name):
    a, b = make_scenario(name, seed=3), make_scenario(name, seed=3)
    assert a == b
    assert make_scenario(name, seed=4) != a
    check_common(a)
    assert all(r.prompt_tokens + r.output_tokens <= 2048 for r in a)
    assert 100 <= max(r.prompt_tokens for r in a) <= 1500
    assert any(m > 0 for m in matches(a))  # something is shared


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scale_multiplies_the_sizes_and_n_sets_the_count(name):
    small = make_scenario(name, seed=1)
    big = make_scenario(name, seed=1, scale=4, n=3)
    total = sum(r.prompt_tokens for r in big) / len(big)
    assert total > 3 * sum(r.prompt_tokens for r in small) / len(small)
    assert len({r.prefix_id for r in big}) <= 3


def test_make_scenario_refuses_unknown_names_and_parameters():
    with pytest.raises(WorkloadError, match="unknown scenario 'chat'; the scenarios are "
                                            "multi-turn, few-shot, doc-qa, parallel, agent"):
        make_scenario("chat")
    with pytest.raises(WorkloadError, match="scenario 'few-shot' has no parameter turns"):
        make_scenario("few-shot", turns=3)
    with pytest.raises(WorkloadError, match="field 'scale' must be a finite number > 0"):
        make_scenario("agent", scale=0)
    assert len(make_scenario("multi-turn", n=2, turns=5)) == 10


@pytest.mark.parametrize("call, message", [
    (lambda: multi_turn(n=0), "field 'n' must be an integer in 1..1,000,000, got 0"),
    (lambda: multi_turn(question_tokens=0), "field 'question_tokens' must be an integer in 1.."),
    (lambda: multi_turn(turn_gap_s=0), "field 'turn_gap_s' must be a finite number > 0"),
    (lambda: multi_turn(n=1000, turns=1001), "n × turns = 1,001,000 requests, over the "),
    (lambda: few_shot(rate_per_s=-1.0), "field 'rate_per_s' must be a finite number > 0 or "
                                        "None"),
    (lambda: few_shot(seed=-1), "field 'seed' must be an integer ≥ 0"),
    (lambda: few_shot(jitter=1.0), "field 'jitter' must be a number in [0, 1)"),
    (lambda: doc_qa(vocab_size=1), "field 'vocab_size' must be an integer in 2.."),
    (lambda: doc_qa(document_tokens=9_000_000, question_tokens=5_000_000, jitter=0.0),
     "over the 10,000,000-token limit"),
    (lambda: doc_qa(n=100_000, document_tokens=1000), "over the 50,000,000-token limit for a "
                                                     "scenario"),
    (lambda: agent(n=1, steps=1000, result_tokens=20_000),
     "over the 10,000,000-token limit"),
    (lambda: parallel(branch_tokens=-1), "field 'branch_tokens' must be an integer in 0.."),
    (lambda: parallel(branch_gap_s=-1), "field 'branch_gap_s' must be a finite number ≥ 0"),
    (lambda: few_shot(n=300, n_prefixes=300, vocab_size=256), "more segments than vocab_size"),
])
def test_bad_sizes_are_workload_errors_naming_the_field(call, message):
    with pytest.raises(WorkloadError) as err:
        call()
    assert message in str(err.value)


def test_a_small_vocab_keeps_ids_below_it_and_the_sharing_exact():
    reqs = multi_turn(SEED, n=6, turns=3, system_tokens=10, question_tokens=6,
                      answer_tokens=4, jitter=0.5, vocab_size=256)
    check_common(reqs, vocab_size=256)
    prev = {}
    L = matches(reqs)
    for r, m in zip(reqs, L, strict=True):
        if r.prefix_id in prev:
            assert m == prev[r.prefix_id].prompt_tokens
        prev[r.prefix_id] = r


# ---- the L_i reference ------------------------------------------------------------------

def test_longest_prefix_matches_by_hand():
    prompts = [(1, 2, 3, 4), (1, 2, 9), (1, 2, 3), (5,), (1, 2, 3, 4, 5), (1, 2, 3, 4), (0,)]
    assert longest_prefix_matches(prompts) == [0, 2, 3, 0, 4, 4, 0]
    assert longest_prefix_matches([]) == []
    assert expected_cached_tokens(prompts) == [0, 2, 2, 0, 4, 3, 0]
    assert expected_cached_tokens(prompts, 2) == [0, 2, 2, 0, 4, 2, 0]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), max_size=30))
def test_longest_prefix_matches_equals_brute_force(prompts):
    assert longest_prefix_matches(prompts) == brute_force(prompts)
    for block in (1, 2, 5):
        want = [min(m, len(p) - 1) // block * block
                for p, m in zip(prompts, brute_force(prompts), strict=True)]
        assert expected_cached_tokens(prompts, block) == want


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(SCENARIOS)), st.integers(0, 2**32), st.floats(0, 0.9))
def test_scenarios_match_brute_force(name, seed, jitter):
    reqs = make_scenario(name, seed=seed, n=3, scale=0.1, jitter=jitter)
    prompts = [ids(r) for r in reqs]
    assert longest_prefix_matches(prompts) == brute_force(prompts)
