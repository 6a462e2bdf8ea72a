"""TokenIds: checked once, a sequence equal to the tuple of its ids, joined without copying;
its block chain is the one a hash prefix cache computes token by token."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kv.block_hashes import ROOT_HASH, hash_block_tokens
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.token_ids import MAX_TOKEN_ID, TokenIds
from inferlab.engines.serve.workload import WorkloadError, WorkloadRequest

ids_lists = st.lists(st.integers(0, 1000), max_size=40)


@settings(max_examples=150, deadline=None)
@given(st.lists(ids_lists, min_size=1, max_size=6), st.data())
def test_a_join_is_the_tuple_of_its_parts_cut(parts, data):
    flat = tuple(t for p in parts for t in p)
    n = data.draw(st.integers(0, len(flat)))
    ids = TokenIds.join([TokenIds(p) for p in parts], n)
    ref = flat[:n]
    assert len(ids) == n and tuple(ids) == ref and ids == ref and list(ids) == list(ref)
    assert ids.max_id == max(ref, default=-1)
    a, b = data.draw(st.integers(-n - 2, n + 2)), data.draw(st.integers(-n - 2, n + 2))
    assert ids[a:b] == ref[a:b] and type(ids[a:b]) is tuple
    assert ids[::2] == ref[::2]
    if n:
        i = data.draw(st.integers(-n, n - 1))
        assert ids[i] == ref[i]
    # joined again (a cut join inside a join) it is still the same ids
    again = TokenIds.join([ids, TokenIds([7, 8])])
    assert tuple(again) == ref + (7, 8)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 50), min_size=4, max_size=4), max_size=5),
       ids_lists, st.sampled_from([1, 2, 4]))
def test_the_block_chain_is_the_hash_caches_own(blocks, tail, bs):
    parts = [TokenIds(b) for b in blocks] + [TokenIds(tail)]
    ids = TokenIds.join(parts)
    hashes, keys = ids.block_chain(bs, hash_block_tokens, ROOT_HASH)
    flat, parent, ref_h, ref_k = tuple(ids), ROOT_HASH, [], []
    for a in range(0, len(flat) - bs + 1, bs):
        key = tuple(flat[a:a + bs])
        parent = hash_block_tokens(parent, key)
        ref_h.append(parent)
        ref_k.append(key)
    assert list(hashes) == ref_h and list(keys) == ref_k
    # a second prompt sharing the leading parts gets the same values (memoised on the parts)
    other = TokenIds.join(parts[:2] + [TokenIds([9] * bs)])
    h2, _ = other.block_chain(bs, hash_block_tokens, ROOT_HASH)
    n_shared = min(len(blocks), 2) * 4 // bs
    assert list(h2[:n_shared]) == ref_h[:n_shared]


def test_bad_ids_are_refused_where_they_are_made():
    with pytest.raises(ValueError, match="token id 1 must be an int"):
        TokenIds([1, -1])
    with pytest.raises(ValueError, match="token id 0 must be an int"):
        TokenIds([True])
    with pytest.raises(ValueError, match="token id 1 must be in"):
        TokenIds.from_array(np.array([0, MAX_TOKEN_ID + 1]))
    with pytest.raises(TypeError, match="TokenIds parts"):
        TokenIds.join([(1, 2)])
    assert TokenIds.from_array(np.array([3, 9, 2])) == (3, 9, 2)


def test_requests_keep_it_and_copies_come_back_equal():
    ids = TokenIds.join([TokenIds([1, 2, 3]), TokenIds([4, 5])], 4)
    assert Request("a", ids, 1).prompt_ids is ids
    w = WorkloadRequest(0.0, 4, 1, prompt_token_ids=ids)
    assert w.prompt_token_ids is ids
    assert pickle.loads(pickle.dumps(ids)) == (1, 2, 3, 4)
    assert hash(ids) == hash((1, 2, 3, 4))
    with pytest.raises(WorkloadError, match="does not match"):
        WorkloadRequest(0.0, 5, 1, prompt_token_ids=ids)
