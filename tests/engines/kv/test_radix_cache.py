"""The radix tree alone: matching and splitting by hand, pages, locks, the eviction orders."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kv.radix_cache import RadixCache
from inferlab.engines.sequences import common_prefix_len


def _slots(tokens, base):
    return [base + i for i in range(len(tokens))]


def test_match_splits_where_a_prompt_leaves_a_node():
    tree = RadixCache()
    assert tree.insert([1, 2, 3, 4], [10, 11, 12, 13])[0] == 0
    m = tree.match_prefix([1, 2, 9])
    assert m.slots == (10, 11) and m.node.key == (1, 2)
    assert [n.key for n in tree.nodes()] == [(1, 2), (3, 4)]  # split: (1,2) -> (3,4)
    assert tree.n_cached_tokens == 4 and tree.n_nodes == 2
    # a second branch keeps its own slots; the shared part keeps the first one's
    n_before, node = tree.insert([1, 2, 7, 8, 9], [20, 21, 22, 23, 24])
    assert n_before == 2 and node.key == (7, 8, 9) and node.value == (22, 23, 24)
    assert tree.match_prefix([1, 2, 7, 8, 9, 5]).slots == (10, 11, 22, 23, 24)
    assert tree.n_cached_tokens == 7
    assert tree.query_tokens == 3 + 6 and tree.hit_tokens == 2 + 5


def test_pages_cut_matches_and_inserts_to_whole_pages():
    tree = RadixCache(page_size=4)
    assert tree.insert(list(range(10)), list(range(100, 110)))[0] == 0
    assert tree.n_cached_tokens == 8  # two pages; the last 2 tokens are not a page
    assert tree.match_len(list(range(7)) + [99]) == 4  # 7 common tokens: one whole page
    assert tree.match_len([0, 1, 2, 3, 4, 5, 6, 7, 8]) == 8
    assert tree.match_len([5, 1, 2, 3]) == 0


def test_peek_changes_nothing():
    tree = RadixCache()
    tree.insert([1, 2, 3], [5, 6, 7])
    assert tree.peek([1, 2, 4]) == (5, 6)
    assert tree.n_nodes == 1 and tree.query_tokens == 0


def test_a_locked_path_is_never_evicted():
    tree = RadixCache()
    _, a = tree.insert([1, 2, 3], [0, 1, 2])
    _, b = tree.insert([1, 2, 4, 5], [0, 1, 3, 4])  # splits (1,2,3): (1,2) -> (3) | (4,5)
    tree.lock(b)
    assert tree.n_protected_tokens == 4 and tree.n_evictable_tokens == 1
    assert tree.reset() == 1  # only (3) goes
    assert [n.key for n in tree.nodes()] == [(1, 2), (4, 5)]
    tree.unlock(b)
    assert tree.n_protected_tokens == 0
    assert tree.reset() == 4 and tree.n_nodes == 0 and tree.n_cached_tokens == 0
    with pytest.raises(ValueError, match="unlocked more often"):
        tree.unlock(b)


@pytest.mark.parametrize("policy, order", [("fifo", [1, 2, 3]), ("lru", [2, 3, 1]),
                                           ("lfu", [3, 1, 2])])
def test_eviction_orders(policy, order):
    """Leaves (1), (2), (3) inserted in that order; then (2) hit three times, (3) once, (1)
    twice, in that order. FIFO evicts by insertion, LRU by last hit, LFU by hit count."""
    gone = []
    tree = RadixCache(eviction_policy=policy, on_drop=lambda node: gone.append(node.key[0]))
    for t in (1, 2, 3):
        tree.insert([t, 0], [10 * t, 10 * t + 1])
    for t in (2, 2, 2, 3, 1, 1):
        assert tree.match_prefix([t, 0]).n_tokens == 2
    assert tree.reset() == 6
    assert gone == order


def test_hooks_see_a_split_as_two_holds_then_one_drop():
    events = []
    tree = RadixCache(on_hold=lambda n: events.append(("hold", n.value)),
                      on_drop=lambda n: events.append(("drop", n.value)))
    tree.insert([1, 2, 3], [7, 8, 9])
    tree.match_prefix([1, 5])
    assert events == [("hold", (7, 8, 9)), ("hold", (7,)), ("hold", (8, 9)),
                      ("drop", (7, 8, 9))]


@settings(max_examples=150, deadline=None)
@given(prompts=st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=12), min_size=1,
                        max_size=12),
       page=st.sampled_from([1, 2, 3]))
def test_matches_equal_the_longest_common_prefix_with_any_inserted(prompts, page):
    """After inserting prompts 0..i-1, prompt i matches the longest common prefix it has with
    any of them in whole pages, with the slots each page prefix was first inserted with; the
    tree holds one page per distinct page-aligned prefix."""
    tree = RadixCache(page_size=page)
    first: dict[tuple, tuple] = {}  # page-aligned prefix -> the slots of its last page
    for i, p in enumerate(prompts):
        best = 0
        for q in prompts[:i]:
            best = max(best, common_prefix_len(tuple(p), tuple(q[: len(q) - len(q) % page])))
        best -= best % page
        m = tree.match_prefix(p)
        assert m.n_tokens == best
        want = [s for j in range(best // page) for s in first[tuple(p[: (j + 1) * page])]]
        assert list(m.slots) == want
        slots = [1000 * i + j for j in range(len(p))]
        tree.insert(p, slots)
        for j in range(len(p) // page):
            first.setdefault(tuple(p[: (j + 1) * page]), tuple(slots[j * page:(j + 1) * page]))
        assert tree.n_cached_tokens == page * len(first)
