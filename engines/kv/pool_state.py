"""`KVPoolState`: every block of a paged pool at one instant, as numpy arrays for the grid view.

One row per physical block: its state (free, cached-free, used by one sequence, shared), the
first sequence holding it, its reference count and how many of its slots hold tokens; plus
each live sequence's block table and the free queue in eviction order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FREE = 0
"""Free, holding nothing reusable."""
CACHED_FREE = 1
"""Free, still holding a cached prefix (a hit revives it; eviction reuses it)."""
USED = 2
"""Held by exactly one sequence."""
SHARED = 3
"""Held by two or more sequences (fork, prefix hit)."""

STATE_NAMES = ("free", "cached-free", "used", "shared")


@dataclass(frozen=True, eq=False)
class KVPoolState:
    block_size: int
    seq_ids: tuple
    """Live sequences; `owner` values index this tuple."""
    state: np.ndarray
    """uint8 [n_blocks]: FREE, CACHED_FREE, USED or SHARED."""
    owner: np.ndarray
    """int32 [n_blocks]: index in `seq_ids` of the first sequence holding the block, -1 if free."""
    ref_count: np.ndarray
    """int32 [n_blocks]."""
    n_tokens: np.ndarray
    """int32 [n_blocks]: slots holding a token (a cached-free block keeps its count)."""
    block_tables: tuple[tuple[int, ...], ...]
    """Per sequence in `seq_ids`: its physical blocks, logical block 0 first; -1 where a
    sliding window dropped the block (`free_queue.NULL_BLOCK`)."""
    free_queue: np.ndarray
    """int32: free block ids, the next to be reused first."""

    @property
    def n_blocks(self) -> int:
        return int(self.state.shape[0])

    def owners_of(self, block_id: int) -> list:
        """Every sequence whose table holds `block_id` (for hover text)."""
        return [s for s, t in zip(self.seq_ids, self.block_tables, strict=True) if block_id in t]
