"""How a `BlockManager` finds cached prefixes: one interface, three strategies.

    PrefixCache      the interface, and the "none" strategy (`NoPrefixCache`): nothing is
                     ever found, every method a no-op
    HashPrefixCache  "hash", vLLM's: chained block hashes over full blocks (`block_hashes`)
    RadixPrefixCache "radix", SGLang's: a radix tree over token ids (`radix_prefix_cache`)

The manager picks one at construction and keeps the block tables; the strategy answers the
lookups and hears about every change to a table that its index must follow:

    hit = cache.match(prompt)         # the longest cached prefix: shared blocks, tokens, room
    cache.claim(hit, n_prompt, n)     # the allocation goes ahead: pin the hit, count the
                                      # lookup, make room for n fresh blocks
    cache.attach(seq, hit)            # the new table's own record of where its prefix ends
    cache.computed(seq, n_tokens)     # K/V written: those blocks may now be found (and
                                      # computed_all(seqs): every token of each, a decode step)
    cache.make_room(n)                # an append is about to take n blocks from the pool
    cache.released(blocks)            # these blocks lost a table's reference
    cache.dropped(blocks)             # ... for good: a sliding window left them behind
    cache.fork(child) / free(seq) / truncate(seq, n_tokens)

`truncate` runs before the cut blocks are released and `free` before a freed table's blocks
are, so an index can still read what they held.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from inferlab.engines.kv.block_hashes import (
    ROOT_CONTENT_ID,
    ROOT_HASH,
    PrefixCacheIndex,
    hash_block_tokens,
)
from inferlab.engines.kv.block_pool import BlockPool
from inferlab.engines.kv.free_queue import NULL_BLOCK, Block
from inferlab.engines.kv.seq_blocks import SeqBlocks

__all__ = ["ROOT_CONTENT_ID", "ROOT_HASH", "HashPrefixCache", "NoPrefixCache", "PrefixCache",
           "PrefixHit", "hash_block_tokens"]


class PrefixHit(NamedTuple):
    """The cached prefix of a prompt, as an allocation would take it."""

    blocks: list[Block]
    """Whole cached blocks a new table shares, logical block 0 first."""
    n_tokens: int
    """Leading prompt tokens whose K/V the hit supplies."""
    n_available: int
    """Blocks an allocation with this hit may take beside `blocks` (free, or evictable and not
    pinned by the hit)."""
    copy_src: Block | None = None
    """The block a hit ending inside a block is copied from (the radix tree), else None."""
    where: object = None
    """The strategy's own handle on where the hit ends (a hash chain, a tree node)."""


class PrefixCache:
    """The strategy interface; as it stands, the "none" strategy: no lookup ever hits."""

    name = "none"
    match_changes_nothing = True
    """`match` without `peek` changes nothing either (the hash strategy's, this one's): an
    admission check's hit may be the allocation's (`BlockManager.try_allocate`)."""
    radix = None
    """The radix tree over the pool (`RadixBlocks`) under the radix strategy, else None."""

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self.block_size = pool.block_size
        self.query_tokens = 0
        """Prompt tokens looked up by allocations, ever."""
        self.hit_tokens = 0
        """Prompt tokens whose K/V a hit supplied to an allocation, ever."""

    # ---- the pool as this strategy sees it ---------------------------------------------------

    def n_available(self) -> int:
        """Blocks an allocation may take now (free, or evictable)."""
        return self.pool.n_free

    @property
    def n_evicted_blocks(self) -> int:
        """Cached blocks whose K/V eviction gave up, ever."""
        return self.pool.n_evictions

    def make_room(self, n_blocks: int) -> None:
        """`n_blocks` blocks are about to be taken from the free queue (an append)."""

    def released(self, blocks: Iterable[Block]) -> None:
        """`blocks` lost one table's reference (a free, a truncation, a copy-on-write)."""

    def dropped(self, blocks: Iterable[Block]) -> None:
        """`blocks` are about to leave a table behind a sliding window (then `released`):
        one that no other table holds is no longer to be found."""

    # ---- lookups -----------------------------------------------------------------------------

    def cached_block_ids(self) -> list[int]:
        """The blocks the index holds, sorted."""
        return []

    def cached_prefix_len(self, token_ids: Sequence[int]) -> int:
        """How many leading tokens of a prompt a hit would supply now, changing nothing."""
        return 0

    def match(self, token_ids: Sequence[int], peek: bool = False) -> PrefixHit:
        """The cached prefix of a non-empty prompt (never its last token: its logits start the
        decode). `peek`: change nothing (an admission check)."""
        return PrefixHit([], 0, self.pool.n_free)

    def trim(self, hit: PrefixHit, n_tokens: int) -> PrefixHit:
        """`hit` (from `match`) cut to its first `n_tokens` tokens, a whole number of blocks: the
        hit every layer group of a model shares (`KVCacheCoordinator`). Nothing here ever
        hits, so there is nothing to cut."""
        if hit.n_tokens > n_tokens:
            raise NotImplementedError(f"the {self.name} prefix cache cannot cut a hit")
        return hit

    def claim(self, hit: PrefixHit, n_prompt_tokens: int, n_new_blocks: int) -> None:
        """An allocation of an `n_prompt_tokens` prompt takes `hit` and `n_new_blocks` fresh
        blocks: one more table holds each hit block (revived if it was free)."""
        self.pool.touch_all(hit.blocks)

    # ---- a sequence's life -------------------------------------------------------------------

    def attach(self, seq: SeqBlocks, hit: PrefixHit) -> None:
        """`seq`'s table was just built on `hit`."""

    def computed(self, seq: SeqBlocks, n_tokens: int) -> None:
        """The K/V of `seq`'s first `n_tokens` tokens is written (never fewer than before)."""

    def computed_all(self, seqs: Iterable[SeqBlocks]) -> None:
        """`computed(seq, all its tokens)` for each of `seqs` (a decode step)."""

    def fork(self, child: SeqBlocks) -> None:
        """`child`, a copy of its parent's record, holds every block of the parent's table."""

    def free(self, seq: SeqBlocks) -> None:
        """`seq` is dropped; its blocks are released next."""

    def truncate(self, seq: SeqBlocks, n_tokens: int) -> None:
        """`seq` is cut back to its first `n_tokens` tokens; the blocks past them are released
        next, then its tokens and counts cut."""


class NoPrefixCache(PrefixCache):
    """"none": every prompt is computed whole."""


class HashPrefixCache(PrefixCache):
    """"hash": full blocks registered under their chained hash once their K/V is written; a
    prompt hits its longest run of registered whole blocks, confirmed exactly by the index
    (`block_hashes.PrefixCacheIndex`). A freed block keeps its entry until the pool hands it
    out again (lazy LRU eviction, `BlockPool.allocate_block`).

    `hash_fn(parent_hash, token_tuple) -> int` is the chained block hash (default this
    module's `hash_block_tokens`, looked up at construction, so tests may monkeypatch it). A
    sequence's chain (`SeqBlocks.chain_hash`, `chain_id`, `n_registered`) names the prefix
    through its registered blocks."""

    name = "hash"

    def __init__(self, pool: BlockPool, index: PrefixCacheIndex,
                 hash_fn: Callable[[int, tuple[int, ...]], int] | None = None) -> None:
        super().__init__(pool)
        self.index = index
        """The pool's index (`pool.cache`): the pool evicts from it lazily."""
        self.hash = hash_block_tokens if hash_fn is None else hash_fn

    def cached_block_ids(self) -> list[int]:
        return sorted(b.block_id for b in self.index)

    def cached_prefix_len(self, token_ids: Sequence[int]) -> int:
        if not len(token_ids):
            return 0
        return len(self._find(token_ids, self._chain(token_ids))[0]) * self.block_size

    def match(self, token_ids: Sequence[int], peek: bool = False) -> PrefixHit:
        chain = self._chain(token_ids)
        hits, chain_hash, chain_id = self._find(token_ids, chain)
        revived = sum(1 for b in hits if b.ref_count == 0)  # free now, in the table next
        return PrefixHit(hits, len(hits) * self.block_size, self.pool.n_free - revived,
                         None, (chain_hash, chain_id, chain))

    def trim(self, hit: PrefixHit, n_tokens: int) -> PrefixHit:
        """The chain after the first n_tokens // block_size hit blocks is the last kept
        block's own hash and content id."""
        keep = hit.blocks[: n_tokens // self.block_size]
        if len(keep) == len(hit.blocks):
            return hit
        chain = hit.where[2] if hit.where is not None else None
        where = (keep[-1].block_hash, keep[-1].content_id, chain) if keep else \
            (ROOT_HASH, ROOT_CONTENT_ID, chain)
        revived = sum(1 for b in keep if b.ref_count == 0)
        return PrefixHit(keep, len(keep) * self.block_size, self.pool.n_free - revived, None,
                         where)

    def claim(self, hit: PrefixHit, n_prompt_tokens: int, n_new_blocks: int) -> None:
        super().claim(hit, n_prompt_tokens, n_new_blocks)  # revive hits before allocating
        self.query_tokens += n_prompt_tokens
        self.hit_tokens += hit.n_tokens

    def attach(self, seq: SeqBlocks, hit: PrefixHit) -> None:
        seq.chain_hash, seq.chain_id, seq.prompt_chain = hit.where
        seq.n_registered = len(hit.blocks)

    def computed(self, seq: SeqBlocks, n_tokens: int) -> None:
        """Register every full block within the first `n_tokens` not registered yet, in order,
        up to a dropped entry (`NULL_BLOCK`: no chain passes a block nobody holds). A block
        of the prompt takes its hash and key from the prompt's chain when it carried one
        (the same values `_register` computes), the others are hashed here."""
        blocks, end = seq.blocks, n_tokens // self.block_size
        first = seq.n_registered
        chain = seq.prompt_chain
        if chain is not None and first < end and first < len(chain[0]):
            first = self._register_chain(seq, first, min(end, len(chain[0])), chain)
            if first is None:
                return
        for index in range(first, end):
            if blocks[index] is NULL_BLOCK:
                return
            self._register(seq, index)

    def _register_chain(self, seq: SeqBlocks, start: int, end: int,
                        chain: tuple[Sequence[int], Sequence[tuple[int, ...]]]) -> int | None:
        """`_register` for blocks start..end-1 with the carried hashes and keys; the next
        index, or None at a dropped entry."""
        blocks = seq.blocks
        try:  # a dropped entry: no chain passes it (a C scan: no Block defines __eq__)
            stop = blocks.index(NULL_BLOCK, start, end)
        except ValueError:
            stop = end
        if stop > start:
            hashes = chain[0]
            seq.chain_id = self.index.register_run(blocks, hashes, chain[1], start, stop,
                                                   seq.chain_id)
            seq.chain_hash, seq.n_registered = hashes[stop - 1], stop
        return end if stop == end else None

    def computed_all(self, seqs: Iterable[SeqBlocks]) -> None:
        bs = self.block_size
        for seq in seqs:
            n = len(seq.token_ids)
            if n // bs > seq.n_registered:  # a block filled up
                self.computed(seq, n)

    def dropped(self, blocks: Iterable[Block]) -> None:
        for block in blocks:
            if block.ref_count == 1 and block.block_hash is not None:
                self.index.evict(block)

    def truncate(self, seq: SeqBlocks, n_tokens: int) -> None:
        """A block only `seq` holds that is registered and no longer lies wholly inside the kept
        tokens is unregistered: its slots are about to be rewritten (the kept partial block) or
        held tokens nobody committed (a released one). A registered block another sequence
        shares keeps its entry: its content stays valid for that holder, and the next append
        here copies it first. The chain is rewound to the last whole kept block."""
        n_full = n_tokens // self.block_size
        for block in seq.blocks[n_full:]:
            if block.block_hash is not None and block.ref_count == 1:
                self.index.evict(block)
        if seq.n_registered > n_full:
            self._rewind(seq, n_full)

    # ---- the chain ---------------------------------------------------------------------------

    def _chain(self, tokens: Sequence[int]):
        """The prompt's carried (hashes, keys) of its full blocks under this cache's hash
        (`TokenIds.block_chain`), or None when its ids carry none."""
        block_chain = getattr(tokens, "block_chain", None)
        if block_chain is None:
            return None
        return block_chain(self.block_size, self.hash, ROOT_HASH)

    def _find(self, tokens: Sequence[int], chain=None) -> tuple[list[Block], int, int]:
        """Cached blocks for the longest prefix of whole blocks within tokens[:-1], and the
        chain (hash, content id) after them. `chain`: the prompt's carried hashes and keys
        (`_chain`), used while they last."""
        hits: list[Block] = []
        chain_hash, chain_id = ROOT_HASH, ROOT_CONTENT_ID
        bs, lookup = self.block_size, self.index.lookup
        n_full = (len(tokens) - 1) // bs
        start = 0
        if chain is not None:
            hashes = chain[0]
            hits = self.index.find_run(hashes, chain[1], min(n_full, len(hashes)))
            start = len(hits)
            if start:
                chain_hash, chain_id = hashes[start - 1], hits[-1].content_id
            if start < min(n_full, len(hashes)):  # a miss inside the chain: the hit ends
                return hits, chain_hash, chain_id
        for i in range(start, n_full):
            block_tokens = tuple(tokens[i * bs : (i + 1) * bs])
            block_hash = self.hash(chain_hash, block_tokens)
            block = lookup(block_hash, chain_id, block_tokens)
            if block is None:
                break
            hits.append(block)
            chain_hash, chain_id = block_hash, block.content_id
        return hits, chain_hash, chain_id

    def _register(self, seq: SeqBlocks, index: int) -> None:
        """Register `seq`'s full block `index` (every block before it is already chained)."""
        bs = self.block_size
        block_tokens = tuple(seq.token_ids[index * bs : (index + 1) * bs])
        block_hash = self.hash(seq.chain_hash, block_tokens)
        seq.chain_id = self.index.register(seq.blocks[index], block_hash, seq.chain_id,
                                           block_tokens)
        seq.chain_hash = block_hash
        seq.n_registered = index + 1

    def _rewind(self, seq: SeqBlocks, n_blocks: int) -> None:
        """Point `seq`'s chain at the end of its first `n_blocks` blocks again: the hashes
        recomputed, the content ids those blocks' entries carry. Stops early where an entry is
        gone (a twin evicted): `computed` registers from there again."""
        bs = self.block_size
        chain_hash, chain_id = ROOT_HASH, ROOT_CONTENT_ID
        n_ok = 0
        for index in range(n_blocks):
            block_tokens = tuple(seq.token_ids[index * bs : (index + 1) * bs])
            block_hash = self.hash(chain_hash, block_tokens)
            entry = self.index.lookup(block_hash, chain_id, block_tokens)
            if entry is None:
                break
            chain_hash, chain_id, n_ok = block_hash, entry.content_id, index + 1
        seq.chain_hash, seq.chain_id, seq.n_registered = chain_hash, chain_id, n_ok
