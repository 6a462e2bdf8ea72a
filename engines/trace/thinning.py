"""Thinning long histories: which records keep their big parts (a pool grid, say).

A run's records stay whole while records × cells per record fits a budget; past it only
every k-th record keeps its detail (and the last one always does). Live labs and snapshot
writers use the same rule with their own budgets.
"""

from __future__ import annotations


def keep_every(n_records: int, cells_per_record: int, cells_limit: int) -> int:
    """k = ⌈n_records · cells_per_record / cells_limit⌉, at least 1: keep every k-th record."""
    return max(1, -(-n_records * cells_per_record // cells_limit))
