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


class FreeBlockQueue:
    """Free blocks in eviction order: pop from the head, append at the tail, remove anywhere.

    Two sentinel nodes bound the list so that no operation needs a special case for the ends.
    A block is in the queue exactly when its `prev` is not None.
    """

    def __init__(self, blocks: Iterable[Block] = ()) -> None:
        self._head = Block(-1)
        self._tail = Block(-1)
        self._head.next = self._tail
        self._tail.prev = self._head
        self._len = 0
        for block in blocks:
            self.append(block)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Block]:
        node = self._head.next
        while node is not self._tail:
            yield node
            node = node.next

    def __contains__(self, block: Block) -> bool:
        return block.prev is not None

    def block_ids(self) -> list[int]:
        """The queued block ids, head (next to be reused) first."""
        return [block.block_id for block in self]

    def peek(self) -> Block:
        """The block `popleft` would return, left in place."""
        if self._len == 0:
            raise IndexError("no free blocks")
        return self._head.next  # type: ignore[return-value]

    def popleft(self) -> Block:
        """Remove and return the head: the least recently freed block."""
        if self._len == 0:
            raise IndexError("no free blocks")
        block = self._head.next
        assert block is not None and block.next is not None
        self._head.next = block.next
        block.next.prev = self._head
        block.prev = block.next = None
        self._len -= 1
        return block

    def append(self, block: Block) -> None:
        """Put `block` at the tail: it will be reused after every block already queued."""
        if block.prev is not None:
            raise ValueError(f"block {block.block_id} is already in the free queue")
        last = self._tail.prev
        assert last is not None
        last.next = block
        block.prev = last
        block.next = self._tail
        self._tail.prev = block
        self._len += 1

    def remove(self, block: Block) -> None:
        """Take `block` out from wherever it is (a prefix-cache hit on a free block)."""
        prev, nxt = block.prev, block.next
        if prev is None or nxt is None:
            raise ValueError(f"block {block.block_id} is not in the free queue")
        prev.next = nxt
        nxt.prev = prev
        block.prev = block.next = None
        self._len -= 1
