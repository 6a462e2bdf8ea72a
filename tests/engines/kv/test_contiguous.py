"""The contiguous baseline: first fit over sorted free extents, coalescing, both fragmentations."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.kv import ContiguousAllocator, KVCapacityError, KVOutOfMemoryError


def test_first_fit_and_coalescing_exact_offsets():
    alloc = ContiguousAllocator(100, max_seq_len=30)
    assert alloc.allocate("a", [1] * 5) == 0
    assert alloc.allocate("b", [1] * 10) == 30
    assert alloc.allocate("c", [1] * 20) == 60
    assert alloc.free_extents() == [(90, 10)]
    assert not alloc.can_allocate(1)  # 10 free slots, but a request reserves 30
    with pytest.raises(KVOutOfMemoryError, match="largest is 10"):
        alloc.allocate("d", [1])
    alloc.free("b")
    assert alloc.free_extents() == [(30, 30), (90, 10)]
    assert alloc.allocate("d", [1]) == 30
    alloc.free("a")
    assert alloc.free_extents() == [(0, 30), (90, 10)]
    alloc.free("d")  # merges with the extent before it
    assert alloc.free_extents() == [(0, 60), (90, 10)]
    alloc.free("c")  # merges on both sides
    assert alloc.free_extents() == [(0, 100)]


def test_first_fit_is_not_best_fit():
    alloc = ContiguousAllocator(100, max_seq_len=50)
    assert alloc.allocate("a", [1], reserve=30) == 0
    assert alloc.allocate("b", [1], reserve=40) == 30
    assert alloc.allocate("c", [1], reserve=20) == 70
    assert alloc.allocate("d", [1], reserve=10) == 90
    alloc.free("a")
    alloc.free("c")
    assert alloc.free_extents() == [(0, 30), (70, 20)]
    assert alloc.allocate("e", [1], reserve=15) == 0  # best fit would pick 70
    assert alloc.free_extents() == [(15, 15), (70, 20)]
    alloc.free("d")  # (90, 10) merges into the extent before it
    assert alloc.free_extents() == [(15, 15), (70, 30)]
    alloc.free("b")
    assert alloc.free_extents() == [(15, 85)]


def test_internal_and_external_fragmentation():
    alloc = ContiguousAllocator(100, max_seq_len=30, bytes_per_slot=2)
    alloc.allocate("a", [1] * 5)
    alloc.allocate("b", [1] * 10)
    alloc.allocate("c", [1] * 20)
    s = alloc.stats(step=1)
    assert (s.allocator, s.n_seqs, s.slots_reserved, s.slots_filled) == ("contiguous", 3, 90, 35)
    assert s.slots_internal_waste == 55 and s.waste_frac == pytest.approx(55 / 90)
    assert s.slots_external_waste == 10 and s.slots_free == 10
    assert s.waste_bytes == 110
    assert alloc.append_token("a", 7) == 5
    assert alloc.num_tokens("a") == 6
    assert alloc.stats().slots_filled == 36


def test_capacity_errors():
    alloc = ContiguousAllocator(100, max_seq_len=30)
    with pytest.raises(KVCapacityError, match="31 tokens"):
        alloc.allocate("a", [1] * 31)
    with pytest.raises(KVCapacityError, match="larger than the whole cache"):
        alloc.can_allocate(5, reserve=101)
    alloc.allocate("a", [1] * 29)
    alloc.append_token("a")
    with pytest.raises(KVCapacityError, match="filled its 30-token"):
        alloc.append_token("a")
    with pytest.raises(ValueError, match="already"):
        alloc.allocate("a", [1])
    with pytest.raises(KeyError):
        alloc.free("zz")


def test_fork_copies_into_a_new_region_and_slot_mapping():
    alloc = ContiguousAllocator(100, max_seq_len=30)
    alloc.allocate("p", [1] * 7)
    assert alloc.fork("p", "c") == (0, 30, 7)
    assert alloc.region("c") == (30, 30)
    assert alloc.slot_mapping("c", [0, 6]).tolist() == [30, 36]
    assert alloc.slot_mapping("p", torch.tensor([3])).tolist() == [3]
    with pytest.raises(IndexError):
        alloc.slot_mapping("p", [7])
