"""The tree's rows for the view and snapshots: by hand, the icicle layout, the round trip and
hostile input."""

from __future__ import annotations

import json
import random

import pytest

from inferlab.engines.kv.radix_cache import RadixCache
from inferlab.engines.kv.radix_state import icicle_rows, radix_state_from_dict, radix_tree_state


def _tree() -> RadixCache:
    tree = RadixCache()
    tree.insert([1, 2, 3, 4], [10, 11, 12, 13])
    tree.insert([1, 2, 7], [10, 11, 20])  # splits (1,2,3,4) into (1,2) -> (3,4) | (7)
    _, leaf = tree.insert([1, 2, 7, 8, 9], [10, 11, 20, 21, 22])
    tree.lock(leaf)
    return tree


def test_rows_by_hand():
    s = radix_tree_state(_tree())
    assert s.n_nodes == 4 and s.n_cached_tokens == 7
    rows = {s.tokens[i]: i for i in range(s.n_nodes)}
    top, left, mid, deep = rows[(1, 2)], rows[(3, 4)], rows[(7,)], rows[(8, 9)]
    assert s.parent[top] == -1 and s.parent[left] == top == s.parent[mid]
    assert s.parent[deep] == mid
    assert [s.start[i] for i in (top, left, mid, deep)] == [0, 2, 2, 3]
    assert [s.lock_ref[i] for i in (top, left, mid, deep)] == [1, 0, 1, 1]
    assert [s.evictable[i] for i in (top, left, mid, deep)] == [False, True, False, False]
    assert s.first_slot[deep] == 21
    assert all(p < i for i, p in enumerate(s.parent))  # parents first


def test_icicle_rows_span_their_leaves():
    s = radix_tree_state(_tree())
    y, h = icicle_rows(s)
    rows = {s.tokens[i]: i for i in range(s.n_nodes)}
    top, left, mid, deep = rows[(1, 2)], rows[(3, 4)], rows[(7,)], rows[(8, 9)]
    assert h[left] == h[deep] == 1.0 and {y[left], y[deep]} == {0.0, 1.0}
    assert (y[mid], h[mid]) == (y[deep], 1.0)
    assert (y[top], h[top]) == (0.0, 2.0)


def test_round_trip_and_hostile_input():
    s = radix_tree_state(_tree())
    d = json.loads(json.dumps(s.to_dict()))
    assert radix_state_from_dict(d, "radix") == s
    bad = dict(d, parent=[0] + d["parent"][1:])  # a node its own parent
    with pytest.raises(ValueError, match=r"radix\.parent\[0\]"):
        radix_state_from_dict(bad, "radix")
    with pytest.raises(ValueError, match="n_tokens says"):
        radix_state_from_dict(dict(d, tokens=[[1]] * s.n_nodes), "radix")
    with pytest.raises(ValueError, match="one per node"):
        radix_state_from_dict(dict(d, start=d["start"][:-1]), "radix")
    rng = random.Random(7)
    for _ in range(300):  # seeded mutations: a clear ValueError or a valid state, nothing else
        m = json.loads(json.dumps(d))
        key = rng.choice(sorted(m))
        m[key] = rng.choice([None, "x", -1, 2**70, [], [None], [[]], {}, True, [1.5],
                             m[key][::-1], m[key] * 2])
        try:
            out = radix_state_from_dict(m, "radix")
        except ValueError:
            continue
        icicle_rows(out)  # whatever reads back, the view can lay it out
