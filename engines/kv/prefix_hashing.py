"""Prefix hashing over sequences: vLLM's chained block hashes walked along a block table.

A prompt's longest cached prefix is found block by block (h_i = H(h_{i-1}, tokens of block
i), confirmed exactly by the index in `prefix_cache`); a sequence's full blocks are registered
once their K/V is written, and its chain (`SeqBlocks.chain_hash`, `chain_id`, `n_registered`)
is rewound when a rollback cuts into it. The block manager decides when; this module knows how.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inferlab.engines.kv.block_pool import BlockPool
from inferlab.engines.kv.free_queue import Block
from inferlab.engines.kv.prefix_cache import ROOT_CONTENT_ID, ROOT_HASH
from inferlab.engines.kv.seq_blocks import SeqBlocks


class PrefixHashing:
    """The hash chain of `pool`'s prefix cache index; `hash_fn(parent_hash, token_tuple) -> int`
    is the chained block hash."""

    def __init__(self, pool: BlockPool, hash_fn: Callable[[int, tuple[int, ...]], int]) -> None:
        self.pool = pool
        self.block_size = pool.block_size
        self.hash = hash_fn

    def find_cached_prefix(self, tokens: Sequence[int]) -> tuple[list[Block], int, int]:
        """Cached blocks for the longest prefix of whole blocks within tokens[:-1], and the
        chain (hash, content id) after them."""
        hits: list[Block] = []
        chain_hash, chain_id = ROOT_HASH, ROOT_CONTENT_ID
        bs = self.block_size
        lookup = self.pool.cache.lookup
        for i in range((len(tokens) - 1) // bs):
            block_tokens = tuple(tokens[i * bs : (i + 1) * bs])
            block_hash = self.hash(chain_hash, block_tokens)
            block = lookup(block_hash, chain_id, block_tokens)
            if block is None:
                break
            hits.append(block)
            chain_hash, chain_id = block_hash, block.content_id
        return hits, chain_hash, chain_id

    def register_computed(self, seq: SeqBlocks, n_tokens: int) -> None:
        """Register every full block within `seq`'s first `n_tokens` tokens that is not
        registered yet, in order."""
        for index in range(seq.n_registered, n_tokens // self.block_size):
            self.register(seq, index)

    def register(self, seq: SeqBlocks, index: int) -> None:
        """Register `seq`'s full block `index` (every block before it is already chained)."""
        bs = self.block_size
        block_tokens = tuple(seq.token_ids[index * bs : (index + 1) * bs])
        block_hash = self.hash(seq.chain_hash, block_tokens)
        seq.chain_id = self.pool.cache.register(
            seq.blocks[index], block_hash, seq.chain_id, block_tokens
        )
        seq.chain_hash = block_hash
        seq.n_registered = index + 1

    def rewind(self, seq: SeqBlocks, n_blocks: int) -> None:
        """Point `seq`'s chain at the end of its first `n_blocks` blocks again: the hashes
        recomputed, the content ids those blocks' cache entries carry. Stops early where an
        entry is gone (a twin evicted): `register_computed` registers from there again."""
        bs = self.block_size
        chain_hash, chain_id = ROOT_HASH, ROOT_CONTENT_ID
        n_ok = 0
        for index in range(n_blocks):
            block_tokens = tuple(seq.token_ids[index * bs : (index + 1) * bs])
            block_hash = self.hash(chain_hash, block_tokens)
            entry = self.pool.cache.lookup(block_hash, chain_id, block_tokens)
            if entry is None:
                break
            chain_hash, chain_id, n_ok = block_hash, entry.content_id, index + 1
        seq.chain_hash, seq.chain_id, seq.n_registered = chain_hash, chain_id, n_ok
