"""What the views draw of a paged pool: its `KVStats` figures and its `KVPoolState` block grid,
read from the pool, the sequences' `SeqBlocks` tables and (radix caching) the tree. O(n_blocks)
each; called once per step by the KV lab, never on the allocation path."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from inferlab.engines.kv.block_pool import BlockPool
from inferlab.engines.kv.pool_state import CACHED_FREE, SHARED, USED, KVPoolState
from inferlab.engines.kv.radix_blocks import RadixBlocks
from inferlab.engines.kv.seq_blocks import SeqBlocks
from inferlab.engines.kv.stats import KVStats


def paged_stats(pool: BlockPool, seqs: Mapping[object, SeqBlocks], *, step: int,
                prefix_hit_tokens: int, prefix_query_tokens: int, evictions: int,
                bytes_per_slot: int) -> KVStats:
    """The pool as a frozen record. A block the radix tree alone holds counts as cached-free;
    a block `ref` sequences share saves (ref - 1) * block_size slots."""
    bs = pool.block_size
    filled = shared = saved = tree_only = 0
    for block in pool.blocks:
        ref = block.ref_count - block.tree_refs  # the sequences holding it
        if ref:
            filled += block.n_tokens
            if ref > 1:
                shared += 1
                saved += (ref - 1) * bs
        elif block.tree_refs:
            tree_only += 1
    used = pool.n_used - tree_only
    cached_free = pool.n_cached_free + tree_only
    return KVStats(
        allocator="paged",
        step=step,
        n_seqs=len(seqs),
        total_slots=pool.n_blocks * bs,
        block_size=bs,
        blocks_total=pool.n_blocks,
        blocks_used=used,
        blocks_free=pool.n_free - pool.n_cached_free,
        blocks_cached_free=cached_free,
        slots_reserved=used * bs,
        slots_filled=filled,
        tokens_logical=sum(len(s.token_ids) for s in seqs.values()),
        slots_external_waste=0,
        shared_blocks=shared,
        shared_saved_slots=saved,
        prefix_hit_tokens=prefix_hit_tokens,
        prefix_query_tokens=prefix_query_tokens,
        evictions=evictions,
        bytes_per_slot=bytes_per_slot,
    )


def paged_pool_state(pool: BlockPool, seqs: Mapping[object, SeqBlocks],
                     radix: RadixBlocks | None) -> KVPoolState:
    """Every block's state, owner, ref count and fill, for the block grid."""
    blocks = pool.blocks
    n = pool.n_blocks
    ref = np.array([b.ref_count - b.tree_refs for b in blocks], dtype=np.int32)
    fill = np.array([b.n_tokens for b in blocks], dtype=np.int32)
    free_blocks = list(pool.free_queue)
    state = np.zeros(n, dtype=np.uint8)
    state[ref == 1] = USED
    state[ref > 1] = SHARED
    state[[b.block_id for b in free_blocks if b.block_hash is not None]] = CACHED_FREE
    if radix is not None:  # kept by the tree alone: evictable or pinned by a lock
        state[radix.tree_only_block_ids()] = CACHED_FREE
    seq_ids = tuple(seqs)
    tables = tuple(tuple([b.block_id for b in s.blocks]) for s in seqs.values())
    # owner = the first sequence (lowest index) whose table holds the block
    owner = np.full(n, len(tables), dtype=np.int32)
    if tables:
        flat = np.fromiter(
            (b for t in tables for b in t), dtype=np.int64, count=sum(map(len, tables))
        )
        index = np.repeat(np.arange(len(tables), dtype=np.int32), [len(t) for t in tables])
        held = flat >= 0  # -1: an entry a sliding window dropped (NULL_BLOCK)
        np.minimum.at(owner, flat[held], index[held])
    owner[owner == len(tables)] = -1
    return KVPoolState(
        block_size=pool.block_size,
        seq_ids=seq_ids,
        state=state,
        owner=owner,
        ref_count=ref,
        n_tokens=fill,
        block_tables=tables,
        free_queue=np.array([b.block_id for b in free_blocks], dtype=np.int32),
    )
