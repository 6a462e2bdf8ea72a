"""Hypothesis state machine over the paged allocator: its invariants hold after every step.

Beside the bookkeeping invariants, the machine plays the model: reserving slots and computing
them are separate rules (a prompt may be prefilled in chunks, steps after it is reserved). A
compute writes each token's "K/V" (a stand-in: the whole prefix that token ends) into a shadow
of the cache at the slot mapping and reports it with `mark_computed`; copy-on-write copies are
applied; every live sequence must read back exactly its own prefixes at every computed
position (a prefix hit counts as computed), and every cached block must hold what its entry
says. So prefix hits, forks and CoW are checked for what they serve, and a block cached before
its K/V was written fails.
"""

from __future__ import annotations

from collections import Counter

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from inferlab.engines.kv import BlockManager, KVOutOfMemoryError

BLOCK_SIZE = 3
N_BLOCKS = 12
# prompts are built from a few shared prefixes so the prefix cache gets hits
PREFIXES = [[], [1, 2, 3], [1, 2, 3, 4, 5, 6], [7, 7, 7, 7]]


class PagedAllocatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mgr = BlockManager(N_BLOCKS, block_size=BLOCK_SIZE)
        self.slots: dict[int, tuple] = {}  # shadow cache: slot -> prefix its K/V encodes
        self.pending: dict[int, list[int]] = {}  # prompt tokens a chunked prefill has left
        self.computed: dict[int, int] = {}  # tokens whose K/V each sequence has written
        self.next_id = 0

    def _copy(self, cows) -> None:
        for src, dst in cows:
            for off in range(BLOCK_SIZE):
                if src * BLOCK_SIZE + off in self.slots:
                    self.slots[dst * BLOCK_SIZE + off] = self.slots[src * BLOCK_SIZE + off]

    @rule(
        prefix=st.sampled_from(PREFIXES),
        tail=st.lists(st.integers(0, 3), max_size=7),
        chunk=st.one_of(st.none(), st.integers(1, 4)),
    )
    def allocate(self, prefix, tail, chunk):
        prompt = prefix + tail
        if not prompt:
            return
        seq = self.next_id
        self.next_id += 1
        fits = self.mgr.can_allocate(prompt, n_new_tokens=chunk)
        expected = self._expected_hit(prompt)
        try:
            n_cached = self.mgr.allocate(seq, prompt, n_new_tokens=chunk)
        except KVOutOfMemoryError:
            assert not fits
            assert self.mgr.take_copies() == []
            return
        assert fits
        self._check_hit(n_cached, expected)
        assert n_cached < len(prompt)
        self._copy(self.mgr.take_copies())  # a hit ending inside a block (radix) is copied
        n = self.mgr.num_tokens(seq)
        assert n == (len(prompt) if chunk is None else min(len(prompt), n_cached + chunk))
        if n < len(prompt):
            self.pending[seq] = prompt[n:]
        self.computed[seq] = n_cached

    def _expected_hit(self, prompt):
        """What the manager will say it cached, when the machine can know beforehand."""
        return None

    def _check_hit(self, n_cached: int, expected) -> None:
        assert n_cached % BLOCK_SIZE == 0  # block hashes hit whole blocks

    @precondition(lambda self: self.mgr.seq_ids)
    @rule(data=st.data(), n=st.integers(1, 4))
    def append(self, data, n):
        seq = data.draw(st.sampled_from(self.mgr.seq_ids))
        if self.pending.get(seq):  # the next chunk of its prompt
            new, self.pending[seq] = self.pending[seq][:n], self.pending[seq][n:]
            n = len(new)
        else:
            new = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        if self.mgr.blocks_needed(self.mgr.num_tokens(seq) + n) > N_BLOCKS:
            return
        fits = self.mgr.can_append(seq, n)
        try:
            cows = self.mgr.append_tokens(seq, new)
        except KVOutOfMemoryError:
            assert not fits
            return
        assert fits and len(cows) <= 1
        if self.pending.get(seq) == []:
            del self.pending[seq]
        self._copy(cows)

    @precondition(lambda self: any(self.computed[s] < self.mgr.num_tokens(s) for s in self.computed))
    @rule(data=st.data(), n=st.integers(1, 5))
    def compute(self, data, n):
        """A model step: write the next (up to) n reserved tokens' K/V, then report it."""
        seq = data.draw(st.sampled_from(
            sorted(s for s in self.computed if self.computed[s] < self.mgr.num_tokens(s))))
        tokens = self.mgr.token_ids(seq)
        start = self.computed[seq]
        end = min(len(tokens), start + n)
        slots = self.mgr.slot_mapping(seq, range(start, end)).tolist()
        for pos, slot in zip(range(start, end), slots, strict=True):
            self.slots[slot] = tuple(tokens[: pos + 1])
        self.computed[seq] = end
        self.mgr.mark_computed(seq, end)

    @precondition(lambda self: self.mgr.seq_ids)
    @rule(data=st.data())
    def fork(self, data):
        parent = data.draw(st.sampled_from(self.mgr.seq_ids))
        child = self.next_id
        self.next_id += 1
        self.mgr.fork(parent, child)
        self.computed[child] = self.computed[parent]
        if parent in self.pending:
            self.pending[child] = list(self.pending[parent])

    @precondition(lambda self: self.mgr.seq_ids)
    @rule(data=st.data())
    def free(self, data):
        seq = data.draw(st.sampled_from(self.mgr.seq_ids))
        self.mgr.free(seq)
        self.pending.pop(seq, None)
        del self.computed[seq]

    @invariant()
    def ref_counts_match_the_tables(self):
        owners: Counter[int] = Counter()
        for seq in self.mgr.seq_ids:
            table = self.mgr.block_table(seq)
            assert len(set(table)) == len(table), "a table holds a block twice"
            assert len(table) == self.mgr.blocks_needed(self.mgr.num_tokens(seq))
            assert all(0 <= b < N_BLOCKS for b in table)
            owners.update(table)
        for block in self.mgr.pool.blocks:
            assert block.ref_count == owners[block.block_id]

    @invariant()
    def free_plus_used_is_total(self):
        free = self.mgr.free_block_ids()
        assert len(set(free)) == len(free)
        assert set(free) == {b.block_id for b in self.mgr.pool.blocks if b.ref_count == 0}
        s = self.mgr.stats()
        assert s.blocks_used + s.blocks_free + s.blocks_cached_free == N_BLOCKS
        assert s.blocks_cached_free == sum(
            1 for b in self.mgr.pool.blocks if b.ref_count == 0 and b.is_cached
        )

    @invariant()
    def every_sequence_reads_its_own_prefixes(self):
        for seq in self.mgr.seq_ids:
            tokens = self.mgr.token_ids(seq)
            slots = self.mgr.slot_mapping(seq, range(self.computed[seq])).tolist()
            for pos, slot in enumerate(slots):
                assert self.slots.get(slot) == tuple(tokens[: pos + 1]), (seq, pos, slot)

    @invariant()
    def cached_blocks_hold_what_their_entry_says(self):
        for block in self.mgr.pool.cache:
            assert block.n_tokens == BLOCK_SIZE
            for off in range(BLOCK_SIZE):  # every slot written, with this block's tokens
                stored = self.slots.get(block.block_id * BLOCK_SIZE + off)
                assert stored is not None and stored[-1] == block.token_ids[off], (block, off)
            assert stored[-BLOCK_SIZE:] == block.token_ids

    def teardown(self):
        for seq in self.mgr.seq_ids:
            self.mgr.free(seq)
        assert self.mgr.pool.n_free == N_BLOCKS
        assert all(b.ref_count == 0 for b in self.mgr.pool.blocks)
        assert self.mgr.stats().blocks_used == 0


TestPagedAllocator = PagedAllocatorMachine.TestCase
TestPagedAllocator.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
