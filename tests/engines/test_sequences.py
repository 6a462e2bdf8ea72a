"""common_prefix_len against the item-by-item count, whatever the types and the limit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from inferlab.engines.sequences import common_prefix_len

items = st.lists(st.integers(0, 3), max_size=40)


def naive(a, b, limit=None) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n] and (limit is None or n < limit):
        n += 1
    return n


@given(items, items, st.none() | st.integers(0, 50), st.sampled_from([tuple, list]))
def test_matches_the_item_by_item_count(a, b, limit, kind):
    assert common_prefix_len(kind(a), kind(b), limit) == naive(a, b, limit)
    assert common_prefix_len(tuple(a), list(b), limit) == naive(a, b, limit)  # mixed types


def test_by_hand():
    assert common_prefix_len((1, 2, 3, 4), (1, 2, 9)) == 2
    assert common_prefix_len([1, 2], [1, 2, 3]) == 2
    assert common_prefix_len((), (1,)) == 0
    assert common_prefix_len((5, 5, 5), (5, 5, 5), limit=1) == 1
