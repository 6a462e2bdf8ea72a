"""Prompt lookup: hand-worked proposals, and properties: every proposal continues an earlier
occurrence of a suffix, the longest one there is, and the most recent of its occurrences."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.speculative.drafter import Drafter, Proposal
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.ngram import NgramDrafter

TEXT = [1, 2, 3, 4, 1, 2, 5, 1, 2]  # ends in "1 2", seen at 0 and at 4


def test_the_longest_suffix_most_recent_occurrence_is_continued():
    drafter = NgramDrafter(max_n=3)
    # "5 1 2" never occurred before; "1 2" did, last at 4: what followed is 5 1 2
    assert drafter.propose(TEXT, 3).tokens == (5, 1, 2)
    assert drafter.propose(TEXT, 2).tokens == (5, 1)
    assert drafter.propose(TEXT, 3).q_probs is None  # certain drafts: q one-hot


@pytest.mark.parametrize("ids, max_n, min_n, k, expected", [
    ([1, 2, 3], 3, 1, 2, ()),  # nothing repeats
    ([5], 3, 1, 4, ()),  # one token: nothing before it
    ([1, 2, 3, 1], 3, 1, 2, (2, 3)),
    ([1, 2, 3, 1], 3, 2, 2, ()),  # only one-token matches, below min_n
    ([7, 7], 1, 1, 4, (7,)),  # the continuation runs into the end of the text
    ([1, 2, 9, 2, 8, 1, 2], 2, 1, 1, (9,)),  # "1 2" (n=2) beats the more recent "2" (n=1)
    ([4, 1, 4, 2, 4], 1, 1, 2, (2, 4)),  # "4" last seen at 2
])
def test_hand_worked_proposals(ids, max_n, min_n, k, expected):
    assert NgramDrafter(max_n, min_n).propose(ids, k).tokens == expected


def test_candidates_are_distinct_continuations_most_recent_first():
    drafter = NgramDrafter(max_n=2)
    candidates = drafter.propose_candidates(TEXT, 3, width=4)
    # "1 2" at 4 then at 0; "2" at 5 and at 1 continue the same way: not repeated
    assert [c.tokens for c in candidates] == [(5, 1, 2), (3, 4, 1)]
    assert [c.tokens for c in drafter.propose_candidates(TEXT, 3, width=1)] == [(5, 1, 2)]
    # a shorter suffix adds its own continuation: "2" at 0 here (its "2" at 3 repeats 7 1)
    ids = [2, 6, 1, 2, 7, 1, 2]
    assert [c.tokens for c in drafter.propose_candidates(ids, 2, width=3)] == [(7, 1), (6, 1)]
    ids = [2, 6, 1, 2, 7, 3, 2]
    assert [c.tokens for c in drafter.propose_candidates(ids, 1, width=3)] == [(7,), (6,)]


def test_the_drafter_fits_the_protocol():
    drafter: Drafter = NgramDrafter()
    assert isinstance(drafter.propose(TEXT, 2), Proposal)
    assert len(drafter.propose(TEXT, 2)) == 2


@pytest.mark.parametrize("call, match", [
    (lambda d: d.propose([], 3), "empty prompt"),
    (lambda d: d.propose(TEXT, 0), "k must be"),
    (lambda d: d.propose(TEXT, True), "k must be"),
    (lambda d: d.propose([1, "a"], 2), "token_ids"),
    (lambda d: d.propose_candidates(TEXT, 2, 0), "width"),
    (lambda d: d.propose_candidates([], 2, 2), "empty prompt"),
])
def test_bad_calls_are_refused_naming_the_parameter(call, match):
    with pytest.raises(SpeculativeError, match=match):
        call(NgramDrafter())


@pytest.mark.parametrize("max_n, min_n, match", [(0, 1, "max_n"), (2, 0, "min_n"),
                                                 (1, 2, "min_n")])
def test_bad_match_lengths_are_refused(max_n, min_n, match):
    with pytest.raises(SpeculativeError, match=match):
        NgramDrafter(max_n, min_n)


def _occurrences(ids: list[int], n: int) -> list[int]:
    """Starts j of earlier occurrences of the last n tokens (not the suffix itself)."""
    suffix = ids[len(ids) - n:]
    return [j for j in range(len(ids) - n) if ids[j:j + n] == suffix]


texts = st.lists(st.integers(0, 3), min_size=1, max_size=40)
lengths = st.tuples(st.integers(1, 4), st.integers(1, 4)).map(sorted)


@settings(max_examples=200, deadline=None)
@given(ids=texts, n_range=lengths, k=st.integers(1, 6))
def test_a_proposal_continues_the_longest_most_recent_earlier_match(ids, n_range, k):
    min_n, max_n = n_range
    proposal = NgramDrafter(max_n, min_n).propose(ids, k).tokens
    matching = [n for n in range(min_n, max_n + 1) if n < len(ids) and _occurrences(ids, n)]
    if not matching:
        assert proposal == ()
        return
    n = max(matching)
    j = max(_occurrences(ids, n))
    assert proposal == tuple(ids[j + n:j + n + k])
    assert 1 <= len(proposal) <= k


@settings(max_examples=200, deadline=None)
@given(ids=texts, n_range=lengths, k=st.integers(1, 6), width=st.integers(1, 5))
def test_every_candidate_continues_an_earlier_occurrence_of_a_suffix(ids, n_range, k, width):
    min_n, max_n = n_range
    drafter = NgramDrafter(max_n, min_n)
    candidates = [c.tokens for c in drafter.propose_candidates(ids, k, width)]
    assert len(candidates) <= width
    assert len(set(candidates)) == len(candidates)
    if candidates:
        assert candidates[0] == drafter.propose(ids, k).tokens
    for c in candidates:
        assert 1 <= len(c) <= k
        assert any(tuple(ids[j + n:j + n + k]) == c
                   for n in range(min_n, max_n + 1) if n < len(ids)
                   for j in _occurrences(ids, n))
