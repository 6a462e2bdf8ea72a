"""The physical block record and the doubly linked queue of free blocks.

The queue is the pool's eviction order: blocks are handed out from the head and returned at
the tail, so the head is always the least recently freed block. A freed block may still hold
a prefix-cached prompt; when a later request hits it, it leaves the queue from wherever it
sits, in O(1), because every block carries its own `prev` / `next` links.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class Block:
    """One physical KV block: `block_size` token slots of every layer's K and V.

    `ref_count` is the number of sequences whose block table holds this block. `n_tokens` is
    how many of its slots hold a token's K/V. `block_hash` / `content_id` / `parent_content_id`
    / `token_ids` are set while the block is registered in the prefix cache (full blocks only)
    and survive a free, so the block can be reused until the free queue evicts it.
    """

    __slots__ = (
        "block_id",
        "ref_count",
        "n_tokens",
        "block_hash",
        "content_id",
        "parent_content_id",
        "token_ids",
        "tree_refs",
        "locked_refs",
        "evictable",
        "prev",
        "next",
    )

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_count = 0
        self.n_tokens = 0
        self.block_hash: int | None = None
        self.content_id = 0
        self.parent_content_id = 0
        self.token_ids: tuple[int, ...] | None = None
        self.tree_refs = 0
        """How many of `ref_count`'s holders are radix-tree nodes (radix prefix caching)."""
        self.locked_refs = 0
        """How many of those nodes are locked (a running request's prefix)."""
        self.evictable = False
        """Only unlocked tree nodes hold it (kept current by RadixBlocks)."""
        self.prev: Block | None = None
        self.next: Block | None = None

    @property
    def is_cached(self) -> bool:
        """True while the block is registered in the prefix cache."""
        return self.block_hash is not None

    def __repr__(self) -> str:
        cached = f", hash={self.block_hash:#x}" if self.block_hash is not None else ""
        return f"Block({self.block_id}, ref={self.ref_count}, n_tokens={self.n_tokens}{cached})"


NULL_BLOCK = Block(-1)
"""The entry a block table keeps where its block was dropped (a sliding window left it behind,
`BlockManager.drop_leading`): it holds nothing, belongs to no pool, and its id (-1) is never
read by attention (each query reads only keys within its window, all held)."""


class LazyBlocks:
    """A pool's blocks by id, each made the first time it is asked for (in id order): a big
    pool (an H100's 26,674 blocks of Llama-3-8B) costs nothing until its blocks are used, and
    a simulated cluster builds one per instance per run. Indexing and iteration are a list's;
    iterating makes every block."""

    __slots__ = ("_made", "_n")

    def __init__(self, n_blocks: int) -> None:
        self._made: list[Block] = []
        self._n = n_blocks

    def __len__(self) -> int:
        return self._n

    @property
    def n_made(self) -> int:
        return len(self._made)

    def make_all(self) -> None:
        """Make every block now (a small pool: `block_pool.EAGER_BLOCKS`)."""
        made = self._made
        made.extend(map(Block, range(len(made), self._n)))

    def __getitem__(self, i):
        made = self._made
        if type(i) is int and 0 <= i < len(made):  # made already: the common case
            return made[i]
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step == 1 and start < stop:  # make through stop - 1 in one go
                made.extend(map(Block, range(len(made), stop)))
                return made[start:stop]
            return [self[j] for j in range(start, stop, step)]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"block {i} of a pool of {self._n}")
        while len(made) <= i:
            made.append(Block(len(made)))
        return made[i]

    def __iter__(self) -> Iterator[Block]:
        if self._n:
            self[self._n - 1]
        return iter(self._made)


class FreeBlockQueue:
    """Free blocks in eviction order: pop from the head, append at the tail, remove anywhere.

    Two sentinel nodes bound the list so that no operation needs a special case for the ends.
    A linked block is in the queue exactly when its `prev` is not None. A pool's blocks that
    were never handed out (`fresh`, a LazyBlocks) wait at the head as a range of ids, in id
    order, before every linked block: what a queue of all of them in id order would do.
    """

    def __init__(self, blocks: Iterable[Block] = (), fresh: LazyBlocks | None = None) -> None:
        self._head = Block(-1)
        self._tail = Block(-1)
        self._head.next = self._tail
        self._tail.prev = self._head
        self._len = 0
        self._fresh = fresh
        self._fresh_next = 0  # fresh ids [_fresh_next, _fresh_end) are queued
        self._fresh_end = 0 if fresh is None else len(fresh)
        self._len = self._fresh_end
        for block in blocks:
            self.append(block)

    def _n_fresh(self) -> int:
        return self._fresh_end - self._fresh_next

    def _link_fresh(self) -> None:
        """Turn the fresh range into linked blocks at the head (for a removal inside it)."""
        n = self._n_fresh()
        if not n:
            return
        first = self._head.next
        prev = self._head
        for i in range(self._fresh_next, self._fresh_end):
            block = self._fresh[i]
            prev.next, block.prev = block, prev
            prev = block
        prev.next, first.prev = first, prev
        self._fresh_next = self._fresh_end

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Block]:
        for i in range(self._fresh_next, self._fresh_end):
            yield self._fresh[i]
        node = self._head.next
        while node is not self._tail:
            yield node
            node = node.next

    def __contains__(self, block: Block) -> bool:
        return block.prev is not None or self._is_fresh(block)

    def _is_fresh(self, block: Block) -> bool:
        return (self._fresh_next <= block.block_id < self._fresh_end
                and self._fresh[block.block_id] is block)

    def block_ids(self) -> list[int]:
        """The queued block ids, head (next to be reused) first."""
        return [block.block_id for block in self]

    def peek(self) -> Block:
        """The block `popleft` would return, left in place."""
        if self._len == 0:
            raise IndexError("no free blocks")
        if self._n_fresh():
            return self._fresh[self._fresh_next]
        return self._head.next  # type: ignore[return-value]

    def popleft(self) -> Block:
        """Remove and return the head: the least recently freed block."""
        if self._len == 0:
            raise IndexError("no free blocks")
        if self._fresh_next < self._fresh_end:
            block = self._fresh[self._fresh_next]
            self._fresh_next += 1
            self._len -= 1
            return block
        block = self._head.next
        assert block is not None and block.next is not None
        self._head.next = block.next
        block.next.prev = self._head
        block.prev = block.next = None
        self._len -= 1
        return block

    def popleft_n(self, n: int) -> list[Block]:
        """Remove and return the first `n` blocks, head first: `popleft` n times, the fresh
        range's part taken in one slice, the linked part unlinked as one run."""
        if n > self._len:
            raise IndexError(f"{n} blocks asked for, {self._len} free")
        k = min(n, self._fresh_end - self._fresh_next)
        blocks = self._fresh[self._fresh_next : self._fresh_next + k] if k else []
        self._fresh_next += k
        self._len -= n
        if n > k:
            node = self._head.next
            for _ in range(n - k):
                blocks.append(node)
                node.prev, node = None, node.next
                blocks[-1].next = None
            self._head.next = node
            node.prev = self._head
        return blocks

    def extend(self, blocks: list[Block]) -> None:
        """`append` each of `blocks`, in order, linked at the tail as one run. The caller
        knows none is queued (each was held by a table until now)."""
        if not blocks:
            return
        prev = self._tail.prev
        for block in blocks:
            if block.prev is not None:
                raise ValueError(f"block {block.block_id} is already in the free queue")
            prev.next = block
            block.prev = prev
            prev = block
        prev.next = self._tail
        self._tail.prev = prev
        self._len += len(blocks)

    def append(self, block: Block) -> None:
        """Put `block` at the tail: it will be reused after every block already queued."""
        if block.prev is not None or self._is_fresh(block):
            raise ValueError(f"block {block.block_id} is already in the free queue")
        last = self._tail.prev
        assert last is not None
        last.next = block
        block.prev = last
        block.next = self._tail
        self._tail.prev = block
        self._len += 1

    def remove_all(self, blocks: list[Block]) -> None:
        """`remove` each of `blocks` (distinct, all queued), in one call."""
        if self._fresh_next < self._fresh_end:  # some may wait in the fresh range
            for block in blocks:
                self.remove(block)
            return
        for block in blocks:
            prev, nxt = block.prev, block.next
            if prev is None or nxt is None:
                raise ValueError(f"block {block.block_id} is not in the free queue")
            prev.next = nxt
            nxt.prev = prev
            block.prev = block.next = None
            self._len -= 1

    def remove(self, block: Block) -> None:
        """Take `block` out from wherever it is (a prefix-cache hit on a free block)."""
        if self._is_fresh(block):
            self._link_fresh()
        prev, nxt = block.prev, block.next
        if prev is None or nxt is None:
            raise ValueError(f"block {block.block_id} is not in the free queue")
        prev.next = nxt
        nxt.prev = prev
        block.prev = block.next = None
        self._len -= 1
