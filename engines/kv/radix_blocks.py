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


class RadixBlocks:
    """A `RadixCache` whose slots are `pool`'s, and the accounting of what it pins."""

    def __init__(self, pool: BlockPool, page_size: int = 1, eviction_policy: str = "lru"
                 ) -> None:
        self.pool = pool
        self.block_size = pool.block_size
        self.tree = RadixCache(page_size, eviction_policy, self._hold, self._drop)
        self.n_evicted_blocks = 0
        """Blocks eviction returned to the free queue, ever."""
        self._version = 0
        self._evictable: frozenset[int] = frozenset()
        self._evictable_version = -1

    # ---- references --------------------------------------------------------------------------

    def _hold(self, node: RadixNode) -> None:
        bs, blocks = self.block_size, self.pool.blocks
        node.payload = tuple(blocks[b] for b in sorted({s // bs for s in node.value}))
        for block in node.payload:
            self.pool.touch(block)
            block.tree_refs += 1
        self._version += 1

    def _drop(self, node: RadixNode) -> None:
        for block in node.payload:
            block.tree_refs -= 1
            self.pool.release(block)
        self._version += 1

    def changed(self) -> None:
        """Some sequence's references changed: recount what is evictable when next asked."""
        self._version += 1

    # ---- what is evictable -----------------------------------------------------------------

    def evictable_block_ids(self) -> frozenset[int]:
        """Blocks only unlocked tree nodes hold (counted again only after a change)."""
        if self._evictable_version != self._version:
            pinned: set[int] = set()
            candidates: set[int] = set()
            for node in self.tree.nodes():
                (pinned if node.lock_ref else candidates).update(
                    b.block_id for b in node.payload)
            blocks = self.pool.blocks
            self._evictable = frozenset(
                b for b in candidates - pinned if blocks[b].ref_count == blocks[b].tree_refs)
            self._evictable_version = self._version
        return self._evictable

    def n_available(self, keep: Sequence[Block] = ()) -> int:
        """Blocks an allocation may take: free ones plus evictable ones not in `keep`."""
        evictable = self.evictable_block_ids()
        kept = sum(1 for b in {b.block_id for b in keep} if b in evictable)
        return self.pool.n_free + len(evictable) - kept

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

    def insert(self, token_ids: Sequence[int], table: Sequence[Block]) -> RadixNode:
        """Cache a sequence's first len(token_ids) tokens from its block table; the node the
        cached prefix ends on."""
        bs = self.block_size
        slots = [table[p // bs].block_id * bs + p % bs for p in range(len(token_ids))]
        return self.tree.insert(token_ids, slots)[1]

    def lock(self, node: RadixNode) -> None:
        self.tree.lock(node)
        self._version += 1

    def unlock(self, node: RadixNode) -> None:
        self.tree.unlock(node)
        self._version += 1

    def tree_only_block_ids(self) -> list[int]:
        """Blocks no sequence holds that the tree keeps (the radix's cached-free)."""
        return [b.block_id for b in self.pool.blocks
                if b.tree_refs and b.ref_count == b.tree_refs]
