"""vLLM's block hashes: the chained hash of a full KV block and the index of cached blocks.

A full block is identified by a chained hash over the whole prefix it ends:

    h_0 = H(ROOT_HASH, tokens of block 0)
    h_i = H(h_{i-1},   tokens of block i)

so two requests share block i's hash only if their first (i+1) * block_size tokens agree
(up to a hash collision). The hash only finds candidates. A hit is confirmed exactly: the
candidate's stored tokens must equal the block's tokens AND its parent must be the very
cache entry matched for block i-1 (each entry gets a `content_id` that is never reused), so a
hit is a true prefix match even if `H` collided at this level or any level before it.

The index is what the pool evicts lazily (`BlockPool`); the hash strategy in `prefix_cache`
walks the chain along block tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from inferlab.engines.kv.free_queue import Block

ROOT_HASH = 0x1F2E3D4C5B6A7988
"""The parent hash of a sequence's first block."""

ROOT_CONTENT_ID = 0
"""The parent content id of a sequence's first block (no cache entry has id 0)."""


def hash_block_tokens(parent_hash: int, token_ids: tuple[int, ...]) -> int:
    """h_i = H(h_{i-1}, tokens of block i), H = Python's tuple hash (64-bit on 64-bit builds).

    Deterministic across processes: ints and tuples of ints are not salted by PYTHONHASHSEED.
    """
    return hash((parent_hash, token_ids))


def chain_hashes(hash_fn: Callable[[int, tuple[int, ...]], int], parent_hash: int,
                 keys: Iterable[tuple[int, ...]]) -> tuple[int, ...]:
    """The chain over `keys` from `parent_hash`: h_i = hash_fn(h_{i-1}, keys[i]), each h_i.
    Under `hash_block_tokens` its hash is taken in place (a prompt chains hundreds)."""
    hashes = []
    if hash_fn is hash_block_tokens:
        for key in keys:
            parent_hash = hash((parent_hash, key))
            hashes.append(parent_hash)
    else:
        for key in keys:
            parent_hash = hash_fn(parent_hash, key)
            hashes.append(parent_hash)
    return tuple(hashes)


class PrefixCacheIndex:
    """Block hash -> the cached block registered under it. Two blocks share a hash only on a
    collision (the same content is never registered twice): the later ones wait in `_more`,
    in the order they were registered, so the common entry is one dict item, not a list."""

    def __init__(self) -> None:
        self._by_hash: dict[int, Block] = {}
        self._more: dict[int, list[Block]] = {}  # hash -> colliding blocks after the first
        self._n_entries = 0
        self._next_content_id = ROOT_CONTENT_ID + 1

    def __len__(self) -> int:
        return self._n_entries

    def __iter__(self) -> Iterator[Block]:
        yield from self._by_hash.values()
        for blocks in self._more.values():
            yield from blocks

    def lookup(
        self, block_hash: int, parent_content_id: int, token_ids: tuple[int, ...]
    ) -> Block | None:
        """The cached block holding exactly `token_ids` after the prefix `parent_content_id`."""
        block = self._by_hash.get(block_hash)
        if block is None:
            return None
        if block.parent_content_id == parent_content_id and block.token_ids == token_ids:
            return block
        return self._lookup_more(block_hash, parent_content_id, token_ids)

    def _lookup_more(self, block_hash: int, parent_content_id: int,
                     token_ids: tuple[int, ...]) -> Block | None:
        """`lookup` among the blocks registered after the first under `block_hash`."""
        for block in self._more.get(block_hash, ()):
            if block.parent_content_id == parent_content_id and block.token_ids == token_ids:
                return block
        return None

    def register(
        self, block: Block, block_hash: int, parent_content_id: int, token_ids: tuple[int, ...]
    ) -> int:
        """Cache the full `block`; return the content id its children chain from.

        If the same content is already cached (two requests computed the same prefix at the
        same time) the existing entry is kept, `block` stays uncached, and the existing
        entry's id is returned so the caller's later blocks still chain correctly.
        """
        existing = self.lookup(block_hash, parent_content_id, token_ids)
        if existing is not None:
            return existing.content_id
        if block_hash in self._by_hash:  # a collision
            self._more.setdefault(block_hash, []).append(block)
        else:
            self._by_hash[block_hash] = block
        content_id = self._next_content_id
        self._next_content_id += 1
        block.block_hash = block_hash
        block.content_id = content_id
        block.parent_content_id = parent_content_id
        block.token_ids = token_ids
        self._n_entries += 1
        return content_id

    def find_run(self, hashes: Sequence[int], keys: Sequence[tuple[int, ...]], n: int
                 ) -> list[Block]:
        """The cached blocks of the longest run of a chain's first `n` blocks (hash i and key
        i, from the root): `lookup` block by block, each after the one matched before,
        stopping at the first miss; inlined, as a long prompt looks up hundreds."""
        get = self._by_hash.get
        hits: list[Block] = []
        parent = ROOT_CONTENT_ID
        if n < len(hashes):
            hashes, keys = hashes[:n], keys[:n]
        for block_hash, key in zip(hashes, keys, strict=False):
            block = get(block_hash)
            if block is None:
                break
            if block.parent_content_id != parent or block.token_ids != key:
                block = self._lookup_more(block_hash, parent, key)
                if block is None:
                    break
            hits.append(block)
            parent = block.content_id
        return hits

    def register_run(self, blocks: list[Block], hashes: Sequence[int],
                     keys: Sequence[tuple[int, ...]], start: int, stop: int,
                     parent_content_id: int) -> int:
        """`register(blocks[i], hashes[i], parent, keys[i])` for i in start..stop-1, each
        chained from the content id the one before returned; the last content id. Inlined,
        as a prefill registers hundreds of blocks."""
        by_hash = self._by_hash
        parent = parent_content_id
        content_id = self._next_content_id
        for i in range(start, stop):
            block_hash, key = hashes[i], keys[i]
            other = by_hash.get(block_hash)
            if other is not None:
                if other.parent_content_id != parent or other.token_ids != key:
                    other = self._lookup_more(block_hash, parent, key)
                if other is not None:  # computed twice at once: the first entry stays
                    parent = other.content_id
                    continue
                self._more.setdefault(block_hash, []).append(blocks[i])  # a collision
            else:
                by_hash[block_hash] = blocks[i]
            block = blocks[i]
            block.block_hash, block.content_id = block_hash, content_id
            block.parent_content_id, block.token_ids = parent, key
            parent = content_id
            content_id += 1
        self._n_entries += content_id - self._next_content_id
        self._next_content_id = content_id
        return parent

    def evict(self, block: Block) -> None:
        """Forget `block`'s cached content (it is about to hold something else)."""
        assert block.block_hash is not None
        self.evict_all((block,))

    def evict_all(self, blocks: Iterable[Block]) -> int:
        """`evict` each registered block of `blocks` (the others are skipped); how many were.
        One call for the run of blocks an allocation takes off the free queue."""
        by_hash, more = self._by_hash, self._more
        n = 0
        for block in blocks:
            block_hash = block.block_hash
            if block_hash is None:
                continue
            if more and block_hash in more:  # a collision: the blocks behind the first
                self._evict_collided(block, block_hash)
            else:
                del by_hash[block_hash]
            block.block_hash = None
            block.content_id = 0
            block.parent_content_id = 0
            block.token_ids = None
            n += 1
        self._n_entries -= n
        return n

    def _evict_collided(self, block: Block, block_hash: int) -> None:
        """Drop `block` from a hash more than one block is registered under; the next
        registered takes the first place."""
        later = self._more[block_hash]
        if self._by_hash[block_hash] is block:
            self._by_hash[block_hash] = later.pop(0)
        else:
            later.remove(block)
        if not later:
            del self._more[block_hash]
