"""The draft vocabulary: the most frequent tokens, mapped back to full ids exactly."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.heads.draft_vocab import DraftVocab


def test_most_frequent_by_hand():
    # counts: 7 -> 3, 2 -> 2, 5 -> 2, 9 -> 1; ties (2, 5) keep id order
    ids = torch.tensor([7, 2, 7, 5, 9, 7, 5, 2])
    v = DraftVocab.most_frequent(ids, vocab_size=10, size=3)
    assert v.d2t.tolist() == [2, 5, 7]
    assert DraftVocab.most_frequent(ids, 10, 2).d2t.tolist() == [2, 7]  # 2 before 5 at a tie
    # unseen ids fill up by id
    assert DraftVocab.most_frequent(ids, 10, 6).d2t.tolist() == [0, 1, 2, 5, 7, 9]


def test_t2d_is_the_inverse_and_outside_is_minus_one():
    v = DraftVocab(torch.tensor([1, 4, 8]), 10)
    assert v.t2d.tolist() == [-1, 0, -1, -1, 1, -1, -1, -1, 2, -1]
    assert v.coverage(torch.tensor([1, 4, 4, 3])) == 0.75


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 63), min_size=1, max_size=200), st.integers(1, 64),
       st.integers(0, 2**16))
def test_draft_tokens_map_back_exactly(ids, size, seed):
    v = DraftVocab.most_frequent(torch.tensor(ids), 64, size)
    d2t = v.d2t
    assert d2t.numel() == size and torch.equal(d2t, torch.sort(torch.unique(d2t)).values)
    assert torch.equal(v.t2d[d2t], torch.arange(size))  # token -> index -> token
    # every id of the top `size` counts is in: no id outside has a larger count
    counts = torch.bincount(torch.tensor(ids), minlength=64)
    inside = torch.zeros(64, dtype=torch.bool)
    inside[d2t] = True
    if size < 64:
        assert int(counts[~inside].max()) <= int(counts[inside].min())
    # full-vocabulary logits: the draft logits at d2t, -inf elsewhere; same argmax token
    logits = torch.randn(3, size, generator=torch.Generator().manual_seed(seed))
    full = v.to_full_logits(logits)
    assert torch.equal(full[:, d2t], logits)
    assert bool(torch.isneginf(full[:, ~inside]).all())
    assert torch.equal(full.argmax(-1), d2t[logits.argmax(-1)])
    assert torch.allclose(torch.softmax(full, -1)[:, d2t], torch.softmax(logits, -1))


@pytest.mark.parametrize("d2t, msg", [([3, 1], "increasing"), ([1, 1], "increasing"),
                                      ([0, 10], "increasing"), ([], "non-empty")])
def test_bad_d2t_refused(d2t, msg):
    with pytest.raises(SpeculativeError, match=msg):
        DraftVocab(torch.tensor(d2t, dtype=torch.int64), 10)


def test_bad_size_named():
    with pytest.raises(SpeculativeError, match="draft vocab size"):
        DraftVocab.most_frequent(torch.tensor([1]), 10, 11)
