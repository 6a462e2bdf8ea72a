"""Hypothesis state machine over the contiguous allocator: extents stay sorted, disjoint and
coalesced, and free plus reserved space is always the whole cache."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from inferlab.engines.kv import ContiguousAllocator, KVOutOfMemoryError

N_SLOTS = 100
MAX_SEQ_LEN = 30


class ContiguousMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.alloc = ContiguousAllocator(N_SLOTS, MAX_SEQ_LEN)
        self.next_id = 0

    @rule(n=st.integers(1, MAX_SEQ_LEN), reserve=st.one_of(st.none(), st.integers(1, 40)))
    def allocate(self, n, reserve):
        size = MAX_SEQ_LEN if reserve is None else reserve
        if n > size:
            return
        seq = self.next_id
        self.next_id += 1
        fits = self.alloc.can_allocate(n, reserve=reserve)
        expect = next((s for s, length in self.alloc.free_extents() if length >= size), None)
        try:
            start = self.alloc.allocate(seq, [0] * n, reserve=reserve)
        except KVOutOfMemoryError:
            assert not fits and expect is None
            return
        assert fits and start == expect  # first fit: the lowest extent that holds it

    @precondition(lambda self: self.alloc.seq_ids)
    @rule(data=st.data())
    def free(self, data):
        self.alloc.free(data.draw(st.sampled_from(self.alloc.seq_ids)))

    @invariant()
    def extents_sorted_disjoint_coalesced(self):
        extents = self.alloc.free_extents()
        for (s0, n0), (s1, _) in zip(extents, extents[1:], strict=False):
            assert s0 + n0 < s1  # sorted, disjoint, and never touching (else merged)
        assert all(n > 0 for _, n in extents)

    @invariant()
    def regions_and_extents_tile_the_cache(self):
        pieces = list(self.alloc.free_extents())
        pieces += [self.alloc.region(s) for s in self.alloc.seq_ids]
        pieces.sort()
        pos = 0
        for start, length in pieces:
            assert start == pos
            pos += length
        assert pos == N_SLOTS

    def teardown(self):
        for seq in self.alloc.seq_ids:
            self.alloc.free(seq)
        assert self.alloc.free_extents() == [(0, N_SLOTS)]


TestContiguous = ContiguousMachine.TestCase
TestContiguous.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
