"""The baseline the paged allocator is measured against: one contiguous region per request.

Before PagedAttention, serving systems gave every request a contiguous KV region big enough
for the longest sequence it might become (`max_seq_len` slots), because the attention kernel
wanted each sequence's keys in one piece. The slots a request reserves but never fills are
internal fragmentation; free extents between regions that are too small for another request
are external fragmentation. Both show up here on the same memory and request stream as the
paged pool.

Free space is a list of (start, length) extents sorted by start; allocation takes the first
extent that fits (first fit) from its start, and freeing merges a region with free neighbours.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

import torch

from inferlab.engines.kv.errors import KVCapacityError, KVOutOfMemoryError
from inferlab.engines.kv.stats import KVStats


class ContiguousAllocator:
    """`n_slots` token slots; each sequence reserves one region of `max_seq_len` slots."""

    def __init__(self, n_slots: int, max_seq_len: int, bytes_per_slot: int = 0) -> None:
        if n_slots < 1:
            raise ValueError(f"n_slots must be positive, got {n_slots}")
        if max_seq_len < 1:
            raise ValueError(f"max_seq_len must be positive, got {max_seq_len}")
        self.n_slots = n_slots
        self.max_seq_len = max_seq_len
        self.bytes_per_slot = bytes_per_slot
        self._starts: list[int] = [0]  # free extents, sorted by start
        self._lengths: list[int] = [n_slots]
        self._regions: dict[object, list[int]] = {}  # seq -> [start, reserved, n_tokens]

    # ---- queries -------------------------------------------------------------------------

    def __contains__(self, seq_id: object) -> bool:
        return seq_id in self._regions

    @property
    def seq_ids(self) -> list:
        return list(self._regions)

    def free_extents(self) -> list[tuple[int, int]]:
        """Free (start, length) extents in address order."""
        return list(zip(self._starts, self._lengths, strict=True))

    def region(self, seq_id: object) -> tuple[int, int]:
        """(start, reserved slots) of `seq_id`'s region."""
        start, reserved, _ = self._region(seq_id)
        return start, reserved

    def num_tokens(self, seq_id: object) -> int:
        return self._region(seq_id)[2]

    @property
    def largest_free_extent(self) -> int:
        return max(self._lengths, default=0)

    # ---- allocation ----------------------------------------------------------------------

    def _reserve_size(self, n_tokens: int, reserve: int | None) -> int:
        size = self.max_seq_len if reserve is None else reserve
        if n_tokens > size:
            raise KVCapacityError(
                f"a request of {n_tokens} tokens exceeds its {size}-token contiguous reservation"
            )
        if size > self.n_slots:
            raise KVCapacityError(
                f"a {size}-token contiguous reservation is larger than the whole cache "
                f"({self.n_slots} slots); it can never run"
            )
        return size

    def _first_fit(self, size: int) -> int:
        for i, length in enumerate(self._lengths):
            if length >= size:
                return i
        return -1

    def can_allocate(self, n_tokens: int, reserve: int | None = None) -> bool:
        """Whether a region for `n_tokens` fits now; `KVCapacityError` if it never can."""
        return self._first_fit(self._reserve_size(n_tokens, reserve)) >= 0

    def allocate(
        self, seq_id: object, token_ids: Sequence[int], reserve: int | None = None
    ) -> int:
        """Reserve `reserve` (default `max_seq_len`) slots for a prompt; return the start."""
        if seq_id in self._regions:
            raise ValueError(f"sequence {seq_id!r} already has a KV region")
        n = len(token_ids)
        if n == 0:
            raise ValueError("cannot allocate KV for an empty prompt")
        size = self._reserve_size(n, reserve)
        i = self._first_fit(size)
        if i < 0:
            raise KVOutOfMemoryError(
                f"no free extent of {size} slots for sequence {seq_id!r} "
                f"(largest is {self.largest_free_extent}, {sum(self._lengths)} slots free)"
            )
        start = self._starts[i]
        if self._lengths[i] == size:
            del self._starts[i], self._lengths[i]
        else:
            self._starts[i] += size
            self._lengths[i] -= size
        self._regions[seq_id] = [start, size, n]
        return start

    def append_token(self, seq_id: object, token_id: int | None = None) -> int:
        """Fill the next slot of `seq_id`'s region; return that slot."""
        region = self._region(seq_id)
        start, reserved, n = region
        if n >= reserved:
            raise KVCapacityError(
                f"sequence {seq_id!r} has filled its {reserved}-token contiguous reservation"
            )
        region[2] = n + 1
        return start + n

    def fork(self, parent_id: object, child_id: object) -> tuple[int, int, int]:
        """Give `child_id` its own region holding a copy of the parent's tokens.

        Returns (src_start, dst_start, n_tokens): the caller copies that many slots.
        Nothing is shared: this is what copy-on-write saves.
        """
        start, reserved, n = self._region(parent_id)
        dst = self.allocate(child_id, range(n), reserve=reserved)
        return start, dst, n

    def free(self, seq_id: object) -> None:
        """Return `seq_id`'s region, merging it with free neighbours."""
        region = self._regions.pop(seq_id, None)
        if region is None:
            raise KeyError(f"unknown sequence {seq_id!r}")
        start, size, _ = region
        starts, lengths = self._starts, self._lengths
        i = bisect.bisect_left(starts, start)
        merge_prev = i > 0 and starts[i - 1] + lengths[i - 1] == start
        merge_next = i < len(starts) and start + size == starts[i]
        if merge_prev and merge_next:
            lengths[i - 1] += size + lengths[i]
            del starts[i], lengths[i]
        elif merge_prev:
            lengths[i - 1] += size
        elif merge_next:
            starts[i] = start
            lengths[i] += size
        else:
            starts.insert(i, start)
            lengths.insert(i, size)

    # ---- model-facing ----------------------------------------------------------------------

    def slot_mapping(self, seq_id: object, positions: Iterable[int] | torch.Tensor) -> torch.Tensor:
        """Flat slots (int64) of `seq_id`'s tokens at `positions`: start + position."""
        start, _, n = self._region(seq_id)
        pos = torch.as_tensor(
            positions if isinstance(positions, torch.Tensor) else list(positions),
            dtype=torch.int64,
        )
        if pos.numel() and (int(pos.min()) < 0 or int(pos.max()) >= n):
            raise IndexError(f"positions outside sequence {seq_id!r}'s {n} tokens")
        return pos + start

    # ---- statistics ------------------------------------------------------------------------

    def stats(self, step: int = 0) -> KVStats:
        reserved = sum(r[1] for r in self._regions.values())
        filled = sum(r[2] for r in self._regions.values())
        unusable = sum(length for length in self._lengths if length < self.max_seq_len)
        return KVStats(
            allocator="contiguous",
            step=step,
            n_seqs=len(self._regions),
            total_slots=self.n_slots,
            block_size=0,
            blocks_total=0,
            blocks_used=0,
            blocks_free=0,
            blocks_cached_free=0,
            slots_reserved=reserved,
            slots_filled=filled,
            tokens_logical=filled,
            slots_external_waste=unusable,
            shared_blocks=0,
            shared_saved_slots=0,
            prefix_hit_tokens=0,
            prefix_query_tokens=0,
            bytes_per_slot=self.bytes_per_slot,
        )

    def _region(self, seq_id: object) -> list[int]:
        try:
            return self._regions[seq_id]
        except KeyError:
            raise KeyError(f"unknown sequence {seq_id!r}") from None
