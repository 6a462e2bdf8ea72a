"""The paged allocator's state machine with the radix tree finding prefixes (page 1 and 2).

The rules and the shadow cache are the hash machine's (tests/engines/kv/
test_block_manager_stateful.py): every live sequence must read back its own prefixes. Here
the tree is checked too, after every step: every cached path's slots hold that path's K/V in
the shadow (a hit that ends inside a block is served by a copy, applied as the runner would);
tree and pool agree on every block's references; no node a live sequence locks was evicted;
and at the end, once the tree is emptied, every block is free. Rollbacks (`truncate`) run
too: a kept block the tree also holds must be copied before it is written again.
"""

from __future__ import annotations

from collections import Counter

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import invariant, precondition, rule

from inferlab.engines.kv import BlockManager
from tests.engines.kv.test_block_manager_stateful import (
    BLOCK_SIZE,
    N_BLOCKS,
    PagedAllocatorMachine,
)


class RadixAllocatorMachine(PagedAllocatorMachine):
    PAGE = 1

    def __init__(self) -> None:
        super().__init__()
        self.mgr = BlockManager(N_BLOCKS, block_size=BLOCK_SIZE, prefix_cache="radix",
                                radix_page_size=self.PAGE)

    def _expected_hit(self, prompt):
        return self.mgr.radix.peek(prompt)

    def _check_hit(self, n_cached: int, expected) -> None:
        assert n_cached == len(expected) and n_cached % self.PAGE == 0

    @precondition(lambda self: any(s not in self.pending for s in self.mgr.seq_ids))
    @rule(data=st.data())
    def truncate(self, data):
        seq = data.draw(st.sampled_from([s for s in self.mgr.seq_ids if s not in self.pending]))
        n = data.draw(st.integers(0, self.mgr.num_tokens(seq)))
        self.mgr.truncate(seq, n)
        self.computed[seq] = min(self.computed[seq], n)

    # ---- invariants (the hash machine's two on the pool are replaced) ------------------------

    @invariant()
    def ref_counts_match_the_tables(self):
        owners: Counter[int] = Counter()
        for seq in self.mgr.seq_ids:
            table = self.mgr.block_table(seq)
            assert len(set(table)) == len(table), "a table holds a block twice"
            assert len(table) == self.mgr.blocks_needed(self.mgr.num_tokens(seq))
            owners.update(table)
        holders: Counter[int] = Counter()
        for node in self.mgr.radix.tree.nodes():
            holders.update(b.block_id for b in node.payload)
            assert {s // BLOCK_SIZE for s in node.value} == {b.block_id for b in node.payload}
        for block in self.mgr.pool.blocks:
            assert block.tree_refs == holders[block.block_id]
            assert block.ref_count == owners[block.block_id] + holders[block.block_id]

    @invariant()
    def free_plus_used_is_total(self):
        free = self.mgr.free_block_ids()
        assert set(free) == {b.block_id for b in self.mgr.pool.blocks if b.ref_count == 0}
        s = self.mgr.stats()
        assert s.blocks_used + s.blocks_free + s.blocks_cached_free == N_BLOCKS
        evictable = self.mgr.radix.evictable_block_ids()
        assert evictable == self.mgr.radix.scan_evictable_block_ids()  # the kept flags
        assert self.mgr.n_free_blocks == len(free) + len(evictable)
        assert self.mgr.radix.n_evictable == len(evictable)
        # evicting everything unlocked frees exactly the evictable blocks
        tree_only = {b.block_id for b in self.mgr.pool.blocks
                     if b.tree_refs and b.ref_count == b.tree_refs}
        assert evictable <= tree_only

    @invariant()
    def cached_blocks_hold_what_their_entry_says(self):
        assert len(self.mgr.pool.cache) == 0  # no block hashes: the tree is the only index

    @invariant()
    def every_cached_path_holds_its_kv(self):
        tree = self.mgr.radix.tree
        stack = [(child, ()) for child in tree.root.children.values()]
        while stack:
            node, prefix = stack.pop()
            assert len(node.key) == len(node.value) and len(node.key) % self.PAGE == 0
            for i, slot in enumerate(node.value):
                path = prefix + node.key[: i + 1]
                assert slot % BLOCK_SIZE == (len(path) - 1) % BLOCK_SIZE
                assert self.slots.get(slot) == path, (node, i)
            stack.extend((c, prefix + node.key) for c in node.children.values())
        assert tree.n_cached_tokens == sum(len(n.key) for n in tree.nodes())

    @invariant()
    def locked_nodes_stay_in_the_tree(self):
        live = set(map(id, self.mgr.radix.tree.nodes()))
        locks: Counter[int] = Counter()
        for seq in self.mgr.seq_ids:
            node = self.mgr._seq(seq).radix_node
            while node is not None and node is not self.mgr.radix.tree.root:
                assert id(node) in live, "a locked node was evicted"
                locks[id(node)] += 1
                node = node.parent
        for node in self.mgr.radix.tree.nodes():
            assert node.lock_ref == locks[id(node)]

    def teardown(self):
        for seq in self.mgr.seq_ids:
            self.mgr.free(seq)
        self.mgr.radix.tree.reset()
        assert self.mgr.radix.tree.n_nodes == 0
        assert self.mgr.pool.n_free == N_BLOCKS
        assert all(b.ref_count == 0 and b.tree_refs == 0 for b in self.mgr.pool.blocks)


class RadixPage2Machine(RadixAllocatorMachine):
    PAGE = 2


TestRadixAllocator = RadixAllocatorMachine.TestCase
TestRadixAllocator.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestRadixPage2 = RadixPage2Machine.TestCase
TestRadixPage2.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
