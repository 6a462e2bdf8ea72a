"""A fixed-capacity ring of samples in one preallocated numpy array.

`append` is O(1) and overwrites the oldest sample once the ring is full; `values()` returns
the held samples oldest first, as a copy the caller may keep.
"""

from __future__ import annotations

import numpy as np


class RingBuffer:
    """`capacity` samples, each of shape `item_shape` (() for scalars), oldest dropped first."""

    def __init__(self, capacity: int, item_shape: tuple[int, ...] = (), dtype=np.float64):
        if int(capacity) < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._data = np.zeros((int(capacity), *item_shape), dtype=dtype)
        self._next = 0  # slot the next append writes
        self._size = 0

    @property
    def capacity(self) -> int:
        return self._data.shape[0]

    @property
    def item_shape(self) -> tuple[int, ...]:
        return self._data.shape[1:]

    def __len__(self) -> int:
        return self._size

    def append(self, item) -> None:
        """Store one sample, overwriting the oldest when full."""
        self._data[self._next] = item
        self._next = (self._next + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)

    def values(self) -> np.ndarray:
        """The held samples, oldest first (a copy of shape (len, *item_shape))."""
        if self._size < self.capacity:
            return self._data[: self._size].copy()
        return np.concatenate((self._data[self._next :], self._data[: self._next]))

    def latest(self):
        """The newest sample (a copy); IndexError when empty."""
        if self._size == 0:
            raise IndexError("ring buffer is empty")
        return self._data[(self._next - 1) % self.capacity].copy()

    def clear(self) -> None:
        """Forget every sample (capacity unchanged)."""
        self._next = 0
        self._size = 0
