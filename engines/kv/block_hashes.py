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

from collections.abc import Iterator, Sequence

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


class PrefixCacheIndex:
    """Block hash -> the cached blocks registered under it (two or more only on a collision)."""

    def __init__(self) -> None:
        self._by_hash: dict[int, list[Block]] = {}
        self._n_entries = 0
        self._next_content_id = ROOT_CONTENT_ID + 1

    def __len__(self) -> int:
        return self._n_entries

    def __iter__(self) -> Iterator[Block]:
        for blocks in self._by_hash.values():
            yield from blocks

    def lookup(
        self, block_hash: int, parent_content_id: int, token_ids: tuple[int, ...]
    ) -> Block | None:
        """The cached block holding exactly `token_ids` after the prefix `parent_content_id`."""
        candidates = self._by_hash.get(block_hash)
        if candidates is None:
            return None
        for block in candidates:
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
        content_id = self._next_content_id
        self._next_content_id += 1
        block.block_hash = block_hash
        block.content_id = content_id
        block.parent_content_id = parent_content_id
        block.token_ids = token_ids
        self._by_hash.setdefault(block_hash, []).append(block)
        self._n_entries += 1
        return content_id

    def find_run(self, hashes: Sequence[int], keys: Sequence[tuple[int, ...]], n: int
                 ) -> list[Block]:
        """The cached blocks of the longest run of a chain's first `n` blocks (hash i and key
        i, from the root): `lookup` block by block, each after the one matched before,
        stopping at the first miss; inlined, as a long prompt looks up hundreds."""
        by_hash = self._by_hash
        hits: list[Block] = []
        parent = ROOT_CONTENT_ID
        for i in range(n):
            candidates = by_hash.get(hashes[i])
            if candidates is None:
                break
            key = keys[i]
            for block in candidates:
                if block.parent_content_id == parent and block.token_ids == key:
                    break
            else:
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
        for i in range(start, stop):
            block, block_hash, key = blocks[i], hashes[i], keys[i]
            candidates = by_hash.get(block_hash)
            if candidates is not None:
                for other in candidates:
                    if other.parent_content_id == parent and other.token_ids == key:
                        break  # computed twice at once: the first entry stays
                else:
                    other = None
                if other is not None:
                    parent = other.content_id
                    continue
            content_id = self._next_content_id
            self._next_content_id += 1
            block.block_hash, block.content_id = block_hash, content_id
            block.parent_content_id, block.token_ids = parent, key
            if candidates is None:
                by_hash[block_hash] = [block]
            else:
                candidates.append(block)
            self._n_entries += 1
            parent = content_id
        return parent

    def evict(self, block: Block) -> None:
        """Forget `block`'s cached content (it is about to hold something else)."""
        assert block.block_hash is not None
        candidates = self._by_hash[block.block_hash]
        if len(candidates) == 1:
            del self._by_hash[block.block_hash]
        else:
            candidates.remove(block)
        self._n_entries -= 1
        block.block_hash = None
        block.content_id = 0
        block.parent_content_id = 0
        block.token_ids = None
