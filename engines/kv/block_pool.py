"""The pool of physical KV blocks: who may use which block, and which block is reused next.

A block is in use while some sequence's table holds it (`ref_count > 0`) and free otherwise.
Free blocks wait in a `FreeBlockQueue` in the order they were freed; `allocate_block` takes
the head. A free block that is still registered in the prefix cache ("cached-free") keeps its
K/V and can be revived by a cache hit (`touch`), which pulls it out of the middle of the
queue; its cache entry is dropped only when the queue hands it out again (lazy LRU eviction).

The pool knows nothing of sequences (`BlockManager` keeps the block tables) nor how prefixes
are found (`prefix_cache`): it is handed the index of registered blocks it evicts from.
"""

from __future__ import annotations

from collections.abc import Collection

from inferlab.engines.kv.free_queue import Block, FreeBlockQueue, LazyBlocks

DEFAULT_BLOCK_SIZE = 16
"""Tokens per block, vLLM's default."""
EAGER_BLOCKS = 1024
"""A pool of at most this many blocks makes them all when it is built, as a server's pool
does at start-up (at most ~0.2 ms), so that its first steps do not make blocks as they hand
them out; a bigger one makes each the first time it is handed out (`LazyBlocks`)."""


def blocks_for_budget(budget_bytes: int, bytes_per_block: int) -> int:
    """How many whole blocks fit in `budget_bytes`: floor(budget_bytes / bytes_per_block)."""
    if bytes_per_block <= 0:
        raise ValueError(f"bytes_per_block must be positive, got {bytes_per_block}")
    if budget_bytes < 0:
        raise ValueError(f"budget_bytes must not be negative, got {budget_bytes}")
    return int(budget_bytes // bytes_per_block)


class BlockPool:
    """`n_blocks` blocks of `block_size` slots and their reference counts.

    `index`: the prefix cache's index of registered blocks (those with a `block_hash`;
    `block_hashes.PrefixCacheIndex`): the blocks it holds, `index.evict(block)` to drop
    one's entry and `index.evict_all(blocks)` those of the registered ones among `blocks`.
    None when no block is ever registered."""

    def __init__(
        self,
        n_blocks: int,
        block_size: int = DEFAULT_BLOCK_SIZE,
        index: Collection[Block] | None = None,
    ) -> None:
        if n_blocks < 1:
            raise ValueError(f"a KV pool needs at least one block, got n_blocks={n_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be positive, got {block_size}")
        self.n_blocks = n_blocks
        self.block_size = block_size
        self.blocks = LazyBlocks(n_blocks)
        if n_blocks <= EAGER_BLOCKS:
            self.blocks.make_all()
        self.free_queue = FreeBlockQueue(fresh=self.blocks)
        self.cache = () if index is None else index  # (): nothing registered, nothing to evict
        self.n_cached_free = 0
        """Free blocks that still hold a cached prefix (revivable by a hit)."""
        self.n_evictions = 0
        """Cached blocks whose content was dropped because the free queue reused them."""
        self.n_block_ops = 0
        """Block allocations + reference increments + reference decrements, ever."""

    @property
    def n_free(self) -> int:
        """Blocks no sequence holds (empty or cached-free): what an allocation may take."""
        return len(self.free_queue)

    @property
    def n_used(self) -> int:
        """Blocks held by at least one sequence."""
        return self.n_blocks - len(self.free_queue)

    def allocate_block(self) -> Block:
        """Hand out the least recently freed block, evicting its cached content if any."""
        block = self._claim(self.free_queue.popleft())
        self.n_block_ops += 1
        return block

    def allocate_blocks(self, n: int, n_tokens: int = 0) -> list[Block]:
        """`allocate_block` n times, head of the free queue first, in one call; each block's
        `n_tokens` set to `n_tokens` (a table's full blocks: block_size)."""
        blocks = self.free_queue.popleft_n(n)
        if self.cache:  # blocks are registered: those taken lose their entries (lazily)
            n_evicted = self.cache.evict_all(blocks)
            self.n_cached_free -= n_evicted
            self.n_evictions += n_evicted
        for block in blocks:
            block.ref_count = 1
            block.n_tokens = n_tokens
        self.n_block_ops += n
        return blocks

    def _claim(self, block: Block) -> Block:
        """A block off the free queue made a fresh one, its cached content evicted lazily."""
        if block.block_hash is not None:
            self.cache.evict(block)
            self.n_cached_free -= 1
            self.n_evictions += 1
        block.ref_count = 1
        block.n_tokens = 0
        return block

    def touch(self, block: Block) -> None:
        """One more table holds `block` (a fork or a prefix hit); revive it if it was free."""
        if block.ref_count == 0:
            self.free_queue.remove(block)
            if block.block_hash is not None:
                self.n_cached_free -= 1
        block.ref_count += 1
        self.n_block_ops += 1

    def touch_all(self, blocks: list[Block]) -> None:
        """`touch` each of `blocks`, in one call (a prefix hit's hundreds); the free ones
        leave the queue at once."""
        revived = []
        for block in blocks:
            if block.ref_count == 0:
                revived.append(block)
            block.ref_count += 1
        if revived:
            self.free_queue.remove_all(revived)
            self.n_cached_free -= sum(1 for b in revived if b.block_hash is not None)
        self.n_block_ops += len(blocks)

    def release(self, block: Block) -> None:
        """One table fewer holds `block`; at zero it joins the free queue's tail, content kept."""
        if block.ref_count <= 0:
            raise ValueError(f"block {block.block_id} released more often than it was held")
        block.ref_count -= 1
        self.n_block_ops += 1
        if block.ref_count == 0:
            self.free_queue.append(block)
            if block.block_hash is not None:
                self.n_cached_free += 1

    def release_blocks(self, blocks: list[Block]) -> None:
        """`release` each of `blocks`, in order, in one call: those reaching zero join the
        free queue's tail in that order."""
        freed = []
        n_cached = 0
        for block in blocks:
            ref_count = block.ref_count
            if ref_count == 1:
                block.ref_count = 0
                freed.append(block)
                if block.block_hash is not None:
                    n_cached += 1
            elif ref_count > 1:
                block.ref_count = ref_count - 1
            else:
                raise ValueError(f"block {block.block_id} released more often than it was "
                                 "held")
        self.n_cached_free += n_cached
        self.n_block_ops += len(blocks)
        self.free_queue.extend(freed)

    def reset_prefix_cache(self) -> int:
        """Drop every cached prefix held by a free block; return how many were dropped."""
        dropped = 0
        for block in list(self.cache):
            if block.ref_count == 0:
                self.cache.evict(block)
                self.n_cached_free -= 1
                dropped += 1
        return dropped
