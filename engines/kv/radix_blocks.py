"""The radix tree over a block pool: which blocks its slots pin, which of them eviction frees.

A tree node holds one pool reference on every block its slots lie in (`Block.tree_refs`
counts them), beside the references of the sequences whose tables hold the block. A block
only the tree holds, through unlocked nodes only, is evictable: evicting every unlocked node
(leaves first; a locked node's ancestors are locked too) frees exactly those blocks.

Token granularity over blocks: a prompt that matches L tokens shares the blocks of its first
L // block_size whole blocks, and when L ends inside a block it gets a fresh block with that
block's K/V copied in (`copy` pairs, as copy-on-write makes), so the next tokens are written
after the copied ones. Any block of a cached path holds valid K/V for every earlier position
of the same block index along that path (the sequence that wrote it held the same tokens),
so block j of a match is the block holding the last matched slot of index j.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferlab.engines.kv.block_pool import BlockPool
from inferlab.engines.kv.free_queue import Block
from inferlab.engines.kv.radix_cache import RadixCache, RadixNode


class _Slots:
    """The flat cache slots of a block table's first n positions, made only for the range
    asked for (an insert reads the part past what the tree already holds)."""

    def __init__(self, table: Sequence[Block], block_size: int, n: int) -> None:
        self.table, self.block_size, self.n = table, block_size, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: slice) -> tuple[int, ...]:
        start, stop, _ = index.indices(self.n)
        bs, out = self.block_size, []
        for j in range(start // bs, -(-stop // bs)):  # one run of slots per block
            base = self.table[j].block_id * bs - j * bs  # slot of position p: base + p
            out.extend(range(base + max(start, j * bs), base + min(stop, (j + 1) * bs)))
        return tuple(out)


class RadixBlocks:
    """A `RadixCache` whose slots are `pool`'s, and the accounting of what it pins.

    Every block's `evictable` flag and the count of flagged blocks are kept current: the tree
    reports holds, drops and lock changes; the block manager calls `recheck` on the blocks
    whose sequence references it changed."""

    def __init__(self, pool: BlockPool, page_size: int = 1, eviction_policy: str = "lru"
                 ) -> None:
        self.pool = pool
        self.block_size = pool.block_size
        self.tree = RadixCache(page_size, eviction_policy, self._hold, self._drop, self._lock)
        self.n_evicted_blocks = 0
        """Blocks eviction returned to the free queue, ever."""
        self.n_evictable = 0
        """Blocks only unlocked tree nodes hold."""

    # ---- references --------------------------------------------------------------------------

    def recheck(self, blocks) -> None:
        """Bring `blocks`' evictable flags (and the count) up to date."""
        for b in blocks:
            now = b.tree_refs > 0 and b.ref_count == b.tree_refs and b.locked_refs == 0
            if now != b.evictable:
                b.evictable = now
                self.n_evictable += 1 if now else -1

    def _hold(self, node: RadixNode) -> None:
        bs, blocks, value = self.block_size, self.pool.blocks, node.value
        # consecutive positions: the block changes only where slot % bs wraps to 0
        first = -value[0] % bs
        node.payload = tuple(blocks[s // bs] for s in (value[0], *value[first or bs :: bs]))
        locked = 1 if node.lock_ref else 0  # the halves of a locked node's split are locked
        for block in node.payload:
            self.pool.touch(block)
            block.tree_refs += 1
            block.locked_refs += locked
        self.recheck(node.payload)

    def _drop(self, node: RadixNode) -> None:
        locked = 1 if node.lock_ref else 0
        for block in node.payload:
            block.tree_refs -= 1
            block.locked_refs -= locked
            self.pool.release(block)
        self.recheck(node.payload)

    def _lock(self, node: RadixNode, delta: int) -> None:
        for block in node.payload:
            block.locked_refs += delta
        self.recheck(node.payload)

    # ---- what is evictable -----------------------------------------------------------------

    def evictable_block_ids(self) -> frozenset[int]:
        """The flagged blocks (O(pool))."""
        return frozenset(b.block_id for b in self.pool.blocks if b.evictable)

    def scan_evictable_block_ids(self) -> frozenset[int]:
        """The same set from the tree alone, by the definition (for checks): blocks held by
        unlocked nodes only and by no sequence."""
        pinned: set[int] = set()
        candidates: set[int] = set()
        for node in self.tree.nodes():
            (pinned if node.lock_ref else candidates).update(b.block_id for b in node.payload)
        blocks = self.pool.blocks
        return frozenset(b for b in candidates - pinned
                         if blocks[b].ref_count == blocks[b].tree_refs)

    def pinned_by(self, slots: Sequence[int]) -> list[Block]:
        """The blocks a match of `slots` pins once its node is locked: every block a matched
        slot lies in. Beside the shared whole blocks and the copy source, a match that ends in
        a short node can lie in a block of another path (one of its first positions)."""
        bs, blocks = self.block_size, self.pool.blocks
        return [blocks[b] for b in dict.fromkeys(s // bs for s in slots)]

    def n_available(self, keep: Sequence[Block] = ()) -> int:
        """Blocks an allocation may take: free ones plus evictable ones not in `keep`."""
        if not keep:
            return self.pool.n_free + self.n_evictable
        kept = sum(1 for b in set(keep) if b.evictable)
        return self.pool.n_free + self.n_evictable - kept

    def ensure_free(self, n_blocks: int) -> None:
        """Evict unlocked leaves, policy order, until `n_blocks` blocks are free (or none is
        left to evict)."""
        pool = self.pool
        if pool.n_free >= n_blocks:
            return
        before = pool.n_free
        self.tree.evict(lambda: pool.n_free >= n_blocks)
        self.n_evicted_blocks += pool.n_free - before

    # ---- matching and inserting --------------------------------------------------------------

    def blocks_of(self, slots: Sequence[int]) -> tuple[list[Block], Block | None]:
        """The whole blocks a matched prefix shares, and the block its partial last block is
        copied from (None when it ends on a block boundary)."""
        bs, blocks = self.block_size, self.pool.blocks
        n = len(slots)
        full = [blocks[slots[(j + 1) * bs - 1] // bs] for j in range(n // bs)]
        return full, (blocks[slots[n - 1] // bs] if n % bs else None)

    def match(self, prompt: Sequence[int]) -> tuple[tuple[int, ...], RadixNode]:
        """The cached prefix of prompt[:-1] (the last prompt token is always computed, for its
        logits): its slots and its node, path marked hit."""
        m = self.tree.match_prefix(prompt[: len(prompt) - 1])
        return m.slots, m.node

    def peek(self, prompt: Sequence[int]) -> tuple[int, ...]:
        """`match`'s slots, changing nothing."""
        return self.tree.peek(prompt[: len(prompt) - 1])

    def insert(self, token_ids: Sequence[int], table: Sequence[Block], n: int,
               start: tuple[RadixNode, int] | None = None) -> RadixNode:
        """Cache a sequence's first n tokens from its block table (walking from `start`, as
        `RadixCache.insert`); the node the cached prefix ends on."""
        slots = _Slots(table, self.block_size, n)
        return self.tree.insert(token_ids, slots, start, n)[1]

    def lock(self, node: RadixNode) -> None:
        self.tree.lock(node)

    def unlock(self, node: RadixNode) -> None:
        self.tree.unlock(node)

    def tree_only_block_ids(self) -> list[int]:
        """Blocks no sequence holds that the tree keeps (the radix's cached-free)."""
        return [b.block_id for b in self.pool.blocks
                if b.tree_refs and b.ref_count == b.tree_refs]
