"""`common_prefix_len`: how many leading items two sequences share — a reused prompt's cached
tokens, two greedy continuations' agreement, a radix tree's match. One function for all."""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix_len(a: Sequence, b: Sequence, limit: int | None = None) -> int:
    """The length of a's and b's longest common prefix, at most `limit`. Two sequences of the
    same type are compared a run at a time (slice equality, C speed, halving on a mismatch);
    others item by item."""
    n = min(len(a), len(b)) if limit is None else min(len(a), len(b), limit)
    if type(a) is not type(b):
        for i in range(n):
            if a[i] != b[i]:
                return i
        return n
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo
