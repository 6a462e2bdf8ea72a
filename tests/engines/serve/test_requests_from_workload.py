"""Engine requests from workload records: shared prefixes by prefix_id, token ids verbatim."""

from __future__ import annotations

import pytest

from inferlab.engines.serve.engine import requests_from_workload
from inferlab.engines.serve.prefix_workloads import longest_prefix_matches, multi_turn
from inferlab.engines.serve.workload import (
    Workload,
    WorkloadError,
    WorkloadRequest,
    generate,
    prompt_token_ids_for,
)

VOCAB = 49_152


def test_requests_without_a_prefix_keep_their_made_up_ids():
    items = [WorkloadRequest(0.5 * i, 5 + i, 3) for i in range(4)]
    reqs = requests_from_workload(items, VOCAB, id_prefix="q")
    assert [r.request_id for r in reqs] == ["q0", "q1", "q2", "q3"]
    for i, r in enumerate(reqs):
        assert r.prompt_ids == tuple((i * 7919 + j * 104729 + 1) % VOCAB
                                     for j in range(5 + i))
        assert (r.max_new_tokens, r.arrival_s) == (3, 0.5 * i)
    assert longest_prefix_matches([r.prompt_ids for r in reqs]) == [0, 0, 0, 0]


def test_the_same_prefix_id_gives_the_same_leading_ids_and_own_parts_stay_distinct():
    items = [WorkloadRequest(0, 40, 1, prefix_id=0), WorkloadRequest(1, 30, 1, prefix_id=1),
             WorkloadRequest(2, 50, 1, prefix_id=0), WorkloadRequest(3, 12, 1, prefix_id=1),
             WorkloadRequest(4, 40, 1), WorkloadRequest(5, 8, 1, prefix_id=0)]
    reqs = requests_from_workload(items, VOCAB, shared_prefix_tokens=16)
    p = [r.prompt_ids for r in reqs]
    assert p[0][:16] == p[2][:16]
    assert p[1][:12] == p[3][:12]
    assert p[5] == p[0][:8]  # shorter than the prefix: all of it is the prefix's
    assert longest_prefix_matches(p) == [0, 0, 16, 12, 0, 8]
    # without shared_prefix_tokens nothing is shared, as before
    plain = requests_from_workload(items, VOCAB)
    assert longest_prefix_matches([r.prompt_ids for r in plain]) == [0] * 6


def test_a_generated_prefix_workload_shares_exactly_its_prefix():
    stream = generate(Workload(60, shared_prefix_tokens=100, n_prefixes=3, seed=5))
    reqs = requests_from_workload(stream, VOCAB, shared_prefix_tokens=100)
    seen, want = set(), []
    for w in stream:
        want.append(100 if w.prefix_id in seen else 0)
        seen.add(w.prefix_id)
    assert longest_prefix_matches([r.prompt_ids for r in reqs]) == want


def test_token_ids_are_used_verbatim():
    convs = multi_turn(1, n=3, turns=2, system_tokens=30, jitter=0.2)
    reqs = requests_from_workload(convs, VOCAB, shared_prefix_tokens=999)
    assert [r.prompt_ids for r in reqs] == [w.prompt_token_ids for w in convs]
    assert [r.max_new_tokens for r in reqs] == [w.output_tokens for w in convs]


def test_an_id_not_below_the_vocab_is_a_clear_error():
    items = [WorkloadRequest(0, 3, 1), WorkloadRequest.from_token_ids(0, [1, 300, 2], 1)]
    with pytest.raises(WorkloadError, match="request 1: field 'prompt_token_ids' item 1 is "
                                            "300, not below the model's vocab_size of 256"):
        requests_from_workload(items, 256)
    assert len(requests_from_workload(items, 301)) == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"vocab_size": 0}, "field 'vocab_size' must be an integer ≥ 1"),
    ({"vocab_size": 100, "shared_prefix_tokens": -1},
     "field 'shared_prefix_tokens' must be an integer ≥ 0"),
])
def test_bad_arguments_are_workload_errors(kwargs, message):
    with pytest.raises(WorkloadError, match=message):
        prompt_token_ids_for([WorkloadRequest(0, 3, 1)], **kwargs)
