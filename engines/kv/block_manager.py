"""Per-sequence block tables over a `BlockPool`: the paged KV allocator a model runner drives.

Each sequence owns a block table (logical block i -> physical block) and the token ids whose
K/V its slots hold or are about to hold. The life of a sequence:

    n_cached = mgr.allocate(seq, prompt_ids)   # reserve the prompt; the first n_cached tokens'
                                               # K/V are already in the cache (prefix hit)
    # prefill: run tokens [n_cached, len(prompt)), writing K/V to mgr.slot_mapping(seq, ...)
    mgr.mark_computed(seq, len(prompt_ids))    # their K/V is written: full blocks become hits
    cows = mgr.append_tokens(seq, [next_id])   # reserve more slots; copy-on-write if the last
                                               # block was shared: copy KV block src->dst
    mgr.fork(seq, seq2)                        # parallel sampling: share every block
    mgr.drop_leading(seq, n)                   # a sliding window left its first n blocks
                                               # behind: released, NULL_BLOCK in their place
    mgr.free(seq)                              # release the tail first

Slot s of the flat cache is block s // block_size, offset s % block_size. A full block enters
the prefix cache only when the caller says its K/V is written (`mark_computed`), not when it is
reserved: a prompt reserved whole but prefilled in chunks, or a sequence stepped after
another that shares its prefix, must not hand out blocks whose K/V nobody wrote yet.

This module is the bookkeeping (block tables: allocate, append, fork, copy-on-write, truncate,
free). The manager composes the other jobs, one module each: the prefix cache, a strategy
chosen at construction (`prefix_cache`: none or vLLM's block hashes; `radix_prefix_cache`:
SGLang's radix tree), `forward_tensors` (slot mappings, block tables and context lengths for
the forward) and `block_stats` (the figures and the block grid the views draw).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import torch

from inferlab.engines.kv import block_stats, forward_tensors
from inferlab.engines.kv.block_hashes import PrefixCacheIndex
from inferlab.engines.kv.block_pool import DEFAULT_BLOCK_SIZE, BlockPool
from inferlab.engines.kv.errors import KVCapacityError, KVOutOfMemoryError
from inferlab.engines.kv.free_queue import NULL_BLOCK, Block
from inferlab.engines.kv.pool_state import KVPoolState
from inferlab.engines.kv.prefix_cache import (
    HashPrefixCache,
    NoPrefixCache,
    PrefixCache,
    PrefixHit,
)
from inferlab.engines.kv.radix_prefix_cache import RadixPrefixCache
from inferlab.engines.kv.seq_blocks import SeqBlocks
from inferlab.engines.kv.stats import KVStats

PREFIX_CACHES = ("hash", "radix", "none")
"""How a manager finds cached prefixes: vLLM's chained block hashes, SGLang's radix tree over
token ids, or not at all."""


class SeqTables(NamedTuple):
    """Some sequences' records (`BlockManager.tables`), for `append_each` to use instead of
    looking each up again while they are valid: while no sequence was allocated, forked or
    freed since (`version`)."""

    records: list[SeqBlocks]
    version: int


def new_prefix_cache(kind: str, n_blocks: int, block_size: int, hash_fn=None,
                     radix_page_size: int = 1, eviction_policy: str = "lru") -> PrefixCache:
    """A pool of `n_blocks` blocks and the `kind` strategy (one of PREFIX_CACHES) over it."""
    if kind == "hash":
        index = PrefixCacheIndex()
        return HashPrefixCache(BlockPool(n_blocks, block_size, index), index, hash_fn)
    if kind == "radix":
        return RadixPrefixCache(BlockPool(n_blocks, block_size), radix_page_size,
                                eviction_policy)
    if kind == "none":
        return NoPrefixCache(BlockPool(n_blocks, block_size))
    raise ValueError(f"prefix_cache must be one of {', '.join(PREFIX_CACHES)}, got {kind!r}")


class BlockManager:
    """Paged KV allocation with reference counts, copy-on-write and automatic prefix caching.

    Block ids run 0..n_blocks-1 and are first handed out in that order. `prefix_cache` (one of
    PREFIX_CACHES) overrides `enable_prefix_caching` (True = "hash"). "hash": `hash_fn(
    parent_hash, token_tuple) -> int` is the chained block hash (default
    `prefix_cache.hash_block_tokens`, looked up when the manager is built, so tests may
    monkeypatch it). "radix": a tree of `radix_page_size`-token pages finds prefixes; a hit
    may end inside a block (its K/V is copied into a fresh one: `take_copies`); unlocked tree
    nodes are evicted, `eviction_policy` order, when an allocation finds too few free blocks.
    """

    def __init__(
        self,
        n_blocks: int,
        block_size: int = DEFAULT_BLOCK_SIZE,
        enable_prefix_caching: bool = True,
        hash_fn=None,
        bytes_per_slot: int = 0,
        prefix_cache: str | None = None,
        radix_page_size: int = 1,
        eviction_policy: str = "lru",
    ) -> None:
        if prefix_cache is None:
            prefix_cache = "hash" if enable_prefix_caching else "none"
        self.prefix_cache = new_prefix_cache(prefix_cache, n_blocks, block_size, hash_fn,
                                             radix_page_size, eviction_policy)
        """The strategy that finds cached prefixes (its `name` is one of PREFIX_CACHES)."""
        self.pool = self.prefix_cache.pool
        self.block_size = block_size
        self.n_blocks = n_blocks
        self.enable_prefix_caching = prefix_cache != "none"
        self.radix = self.prefix_cache.radix
        """The radix tree over the pool (the tree view draws it), or None."""
        self._copies: list[tuple[int, int]] = []
        self.bytes_per_slot = bytes_per_slot
        self._seqs: dict[object, SeqBlocks] = {}
        self._version = 0  # bumped whenever _seqs gains, loses or replaces a record

    # ---- queries ---------------------------------------------------------------------------

    def __contains__(self, seq_id: object) -> bool:
        return seq_id in self._seqs

    @property
    def seq_ids(self) -> list:
        """Live sequences, in the order they were allocated or forked."""
        return list(self._seqs)

    @property
    def n_free_blocks(self) -> int:
        """Blocks an allocation may take now (empty plus cached-free, or evictable)."""
        return self.prefix_cache.n_available()

    @property
    def n_evicted_blocks(self) -> int:
        """Cached blocks whose K/V eviction gave up, ever: a hash cache's cached-free blocks
        reused, a radix tree's blocks freed by evicting its nodes."""
        return self.prefix_cache.n_evicted_blocks

    @property
    def prefix_query_tokens(self) -> int:
        """Prompt tokens looked up in the prefix cache, ever."""
        return self.prefix_cache.query_tokens

    @property
    def prefix_hit_tokens(self) -> int:
        """Prompt tokens whose K/V a prefix hit supplied, ever."""
        return self.prefix_cache.hit_tokens

    @property
    def prefix_hit_rate(self) -> float:
        """prefix_hit_tokens / prefix_query_tokens (0 before any lookup)."""
        q = self.prefix_query_tokens
        return self.prefix_hit_tokens / q if q else 0.0

    def block_table(self, seq_id: object) -> list[int]:
        """Physical block ids of `seq_id`, logical block 0 first."""
        return [b.block_id for b in self._seq(seq_id).blocks]

    def num_tokens(self, seq_id: object) -> int:
        """Tokens with a reserved slot (prompt plus appended)."""
        return len(self._seq(seq_id).token_ids)

    def token_ids(self, seq_id: object) -> list[int]:
        """A copy of the tokens `seq_id`'s slots hold, in order."""
        return list(self._seq(seq_id).token_ids)

    def num_cached_tokens(self, seq_id: object) -> int:
        """How many leading prompt tokens a prefix hit supplied at `allocate`."""
        return self._seq(seq_id).n_cached_tokens

    def ref_count(self, block_id: int) -> int:
        return self.pool.blocks[block_id].ref_count

    def free_block_ids(self) -> list[int]:
        """The free queue, head (next reused) first."""
        return self.pool.free_queue.block_ids()

    def cached_block_ids(self) -> list[int]:
        """Blocks registered in the prefix cache, or held by the radix tree (in use or
        cached-free), sorted."""
        return self.prefix_cache.cached_block_ids()

    def cached_prefix_len(self, token_ids: Sequence[int]) -> int:
        """How many leading tokens of a prompt a prefix hit would supply now, changing nothing
        (what a cache-aware scheduler ranks by)."""
        return self.prefix_cache.cached_prefix_len(token_ids)

    def take_copies(self) -> list[tuple[int, int]]:
        """The (src, dst) block copies allocations made since the last call (a radix hit that
        ends inside a block): copy each block's K/V before the next forward writes any."""
        copies, self._copies = self._copies, []
        return copies

    # ---- capacity ----------------------------------------------------------------------------

    def blocks_needed(self, n_tokens: int) -> int:
        """ceil(n_tokens / block_size)."""
        return -(-n_tokens // self.block_size)

    def _check_capacity(self, n_tokens: int, what: str = "a request") -> int:
        need = self.blocks_needed(n_tokens)
        if need > self.n_blocks:
            raise KVCapacityError(
                f"{what} of {n_tokens} tokens needs {need} KV blocks of {self.block_size} "
                f"tokens, but the whole cache has {self.n_blocks} blocks "
                f"({self.n_blocks * self.block_size} tokens); it can never run"
            )
        return need

    def can_allocate(
        self, tokens: int | Sequence[int], n_new_tokens: int | None = None,
        max_hit_tokens: int | None = None,
    ) -> bool:
        """Whether a prompt fits in the free blocks now.

        `tokens` is a token count (assumes no prefix hit: conservative) or the prompt's token
        ids (counts exactly what `allocate(seq, tokens, n_new_tokens, max_hit_tokens)` would
        take). Raises `KVCapacityError` when the prompt can never fit, so a scheduler refuses
        it instead of waiting forever.
        """
        if isinstance(tokens, int):
            self._check_capacity(tokens)
            n = tokens if n_new_tokens is None else min(tokens, n_new_tokens)
            return self.blocks_needed(n) <= self.pool.n_free
        self._check_prompt(tokens, n_new_tokens)
        hit = self._match(tokens, max_hit_tokens, peek=True)
        n = self._n_reserved(len(tokens), hit.n_tokens, n_new_tokens)
        return self.blocks_needed(n) - len(hit.blocks) <= hit.n_available

    def can_append(self, seq_id: object, n_tokens: int = 1) -> bool:
        """Whether `append_tokens(seq_id, n_tokens ids)` would find its blocks free now."""
        seq = self._seq(seq_id)
        need = self._append_blocks_needed(seq, n_tokens)
        return need <= self.pool.n_free or need <= self.n_free_blocks

    # ---- allocation ----------------------------------------------------------------------------

    def allocate(
        self, seq_id: object, token_ids: Sequence[int], n_new_tokens: int | None = None,
        max_hit_tokens: int | None = None,
    ) -> int:
        """Reserve slots for a prompt; return how many leading tokens the prefix cache supplied.

        Prefix hits never cover the last prompt token: it is always recomputed (its logits
        start decoding). `n_new_tokens` reserves the cached prefix plus at most that many more
        tokens, for chunked prefill: the rest of the prompt follows with `append_tokens`.
        `max_hit_tokens` cuts the hit (whole blocks): the hit every layer group shares.
        """
        hit, n, n_fresh = self._plan(seq_id, token_ids, n_new_tokens, max_hit_tokens, False)
        if n_fresh > hit.n_available:
            raise KVOutOfMemoryError(
                f"sequence {seq_id!r} needs {n_fresh} free KV blocks, "
                f"{hit.n_available} are free or evictable"
            )
        return self._take(seq_id, token_ids, hit, n, n_fresh)

    def try_allocate(
        self, seq_id: object, token_ids: Sequence[int], n_new_tokens: int | None = None,
        max_hit_tokens: int | None = None,
    ) -> int | None:
        """`allocate` if `can_allocate` says the prompt fits now, else None (nothing changed):
        a scheduler's admission. Where the strategy's lookup changes nothing (hash, none) the
        prompt is matched once, not once to check and once to allocate: a long prompt's
        match walks hundreds of blocks."""
        hit, n, n_fresh = self._plan(seq_id, token_ids, n_new_tokens, max_hit_tokens, True)
        if n_fresh > hit.n_available:
            return None
        if not self.prefix_cache.match_changes_nothing:  # radix: match for real, as allocate
            return self.allocate(seq_id, token_ids, n_new_tokens, max_hit_tokens)
        return self._take(seq_id, token_ids, hit, n, n_fresh)

    def _plan(self, seq_id: object, token_ids: Sequence[int], n_new_tokens: int | None,
              max_hit_tokens: int | None, peek: bool) -> tuple[PrefixHit, int, int]:
        """A new sequence's checks, then (its prefix hit, tokens reserved, fresh blocks
        needed)."""
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id!r} already has KV blocks")
        self._check_prompt(token_ids, n_new_tokens)
        hit = self._match(token_ids, max_hit_tokens, peek=peek)
        n = self._n_reserved(len(token_ids), hit.n_tokens, n_new_tokens)
        return hit, n, self.blocks_needed(n) - len(hit.blocks)

    def _match(self, token_ids: Sequence[int], max_hit_tokens: int | None, peek: bool
               ) -> PrefixHit:
        """The prompt's prefix hit, cut to `max_hit_tokens`."""
        cache = self.prefix_cache
        hit = cache.match(token_ids, peek=peek)
        if max_hit_tokens is not None and hit.n_tokens > max_hit_tokens:
            hit = cache.trim(hit, max_hit_tokens)
        return hit

    def _take(self, seq_id: object, token_ids: Sequence[int], hit: PrefixHit, n: int,
              n_fresh: int) -> int:
        """`allocate`'s change, once `hit` was found to leave room for `n_fresh` fresh blocks:
        the table of `n` tokens built on it; the hit's tokens."""
        cache = self.prefix_cache
        cache.claim(hit, len(token_ids), n_fresh)  # the hit revived before any allocation
        blocks = self._table(hit.blocks, n)
        if hit.copy_src is not None:
            self._copies.append((hit.copy_src.block_id, blocks[len(hit.blocks)].block_id))
        seq = SeqBlocks(blocks, list(token_ids[:n]), hit.n_tokens, len(token_ids))
        cache.attach(seq, hit)
        self._seqs[seq_id] = seq
        self._version += 1
        return hit.n_tokens

    def append_token(self, seq_id: object, token_id: int) -> tuple[int, int] | None:
        """Reserve the slot of one more token (`append_each` for one sequence): its
        copy-on-write pair `(src, dst)`, or None; `KVOutOfMemoryError` when no block is free.

        A pair means the last block was shared (after a fork): `seq_id` now owns a fresh copy
        `dst`, and the caller must copy block `src`'s K/V into it
        (`PagedKVCache.copy_blocks`) before writing the new token.
        """
        cows = self.append_each((seq_id,), (token_id,), partial=False)[1]
        return cows[0][1:] if cows else None

    def append_each(self, seq_ids: Sequence[object], token_ids: Sequence[int],
                    partial: bool = True, tables: SeqTables | None = None
                    ) -> tuple[int, list[tuple[object, int, int]]]:
        """One more token for each of `seq_ids` (`token_ids[i]` for `seq_ids[i]`), in order:
        a decode step's reservations in one call. Returns (how many got their slot, the
        copy-on-write (seq_id, src, dst) they made, in order). `tables`: `tables(seq_ids)`,
        used while valid (a steady decode batch need not look its sequences up every step).

        A token that fits in its sequence's last block, which no other table holds, takes the
        next slot in place; one that starts a block takes the pool's next free block; any
        other (a shared last block to copy, no free block) goes the `append_tokens` way. With
        `partial` the step stops before the first sequence the pool has no block for (it and
        those after it are unchanged); without, that `KVOutOfMemoryError` is raised. An
        unknown id is a KeyError before any change.
        """
        if tables is not None and tables.version == self._version:
            records = tables.records
        else:
            records = self._records(seq_ids)
        bs = self.block_size
        cows: list[tuple[object, int, int]] = []
        ahead: list[Block] = []  # the blocks of a run of tokens that start one, last first
        for i, seq in enumerate(records):
            tokens = seq.token_ids
            if len(tokens) % bs:
                last = seq.blocks[-1]
                if last.ref_count == 1:  # the common decode: in place, nothing to check
                    tokens.append(token_ids[i])
                    last.n_tokens += 1
                    continue
            else:
                if not ahead:
                    ahead = self._run_blocks(records, i)
                if ahead:  # a free block: the table is below capacity, nothing to evict
                    seq.blocks.append(ahead.pop())  # its n_tokens 1 already
                    tokens.append(token_ids[i])
                    continue
            seq_id = seq_ids[i]
            try:
                made = self._grow(seq, seq_id, (token_ids[i],))
            except KVOutOfMemoryError:
                if partial:
                    return i, cows
                raise
            if made:
                cows.append((seq_id, *made[0]))
        return len(records), cows

    def tables(self, seq_ids: Sequence[object]) -> SeqTables:
        """The records of `seq_ids` now, for `append_each` (KeyError for an unknown id)."""
        return SeqTables(self._records(seq_ids), self._version)

    def _records(self, seq_ids: Sequence[object]) -> list[SeqBlocks]:
        try:
            return list(map(self._seqs.__getitem__, seq_ids))
        except KeyError as e:
            raise KeyError(f"unknown sequence {e.args[0]!r}") from None

    def _run_blocks(self, records: list[SeqBlocks], i: int) -> list[Block]:
        """The pool's next free blocks for `records[i]`, whose next token starts a block, and
        the distinct sequences right after it whose next token starts one too, as many as
        the pool has free (none when it has none), taken at once: last first, to pop. The
        same blocks `allocate_block` would hand them one by one: nothing else takes one
        between them."""
        n_free = self.pool.n_free
        if not n_free:
            return []
        bs = self.block_size
        end = min(len(records), i + n_free)
        run = {records[i]}
        j = i + 1
        while j < end:
            seq = records[j]
            if len(seq.token_ids) % bs or seq in run:
                break
            run.add(seq)
            j += 1
        blocks = self.pool.allocate_blocks(j - i, 1)  # each takes its sequence's next token
        blocks.reverse()
        return blocks

    def append_tokens(self, seq_id: object, token_ids: Sequence[int]) -> list[tuple[int, int]]:
        """Reserve slots for more tokens of `seq_id` (a prefill chunk, drafts, a decode): the
        one append path, which allocates blocks and copies a shared last block.

        Returns the copy-on-write pairs (at most one). All or nothing: on
        `KVOutOfMemoryError` / `KVCapacityError` the sequence is unchanged.
        """
        return self._grow(self._seq(seq_id), seq_id, token_ids)

    def _grow(self, seq: SeqBlocks, seq_id: object, token_ids: Sequence[int]
              ) -> list[tuple[int, int]]:
        n_new = len(token_ids)
        if n_new == 0:
            return []
        bs, blocks, tokens, pool = self.block_size, seq.blocks, seq.token_ids, self.pool
        n_old = len(tokens)
        n_total = n_old + n_new
        n_blocks = -(-n_total // bs)
        if n_blocks > self.n_blocks:
            self._check_capacity(n_total, f"sequence {seq_id!r}")
        room = -n_old % bs  # free slots in the last block
        cow = room and blocks[-1].ref_count > 1  # it is shared: this table gets a copy
        need = n_blocks - len(blocks) + (1 if cow else 0)
        if need:
            if need > pool.n_free and need > self.n_free_blocks:
                raise KVOutOfMemoryError(
                    f"sequence {seq_id!r} needs {need} free KV blocks to grow, "
                    f"{self.n_free_blocks} are free"
                )
            self.prefix_cache.make_room(need)
        cows: list[tuple[int, int]] = []
        if cow:
            last = blocks[-1]
            fresh = pool.allocate_block()
            fresh.n_tokens = last.n_tokens
            pool.release(last)
            self.prefix_cache.released((last,))
            blocks[-1] = fresh
            seq.table_version += 1
            cows.append((last.block_id, fresh.block_id))
        tokens.extend(token_ids)
        if room:
            blocks[-1].n_tokens += min(room, n_new)
        if n_blocks > len(blocks):  # fresh blocks, each full but the last
            blocks += pool.allocate_blocks(n_blocks - len(blocks), bs)
            blocks[-1].n_tokens = n_total - (n_blocks - 1) * bs
        return cows

    def _append_blocks_needed(self, seq: SeqBlocks, n_new: int) -> int:
        n_old = len(seq.token_ids)
        need = self.blocks_needed(n_old + n_new) - len(seq.blocks)
        if n_old % self.block_size and seq.blocks[-1].ref_count > 1:
            need += 1
        return need

    def fork(self, parent_id: object, child_id: object) -> None:
        """Give `child_id` the parent's tokens and table, sharing every block (ref count + 1)."""
        parent = self._seq(parent_id)
        if child_id in self._seqs:
            raise ValueError(f"sequence {child_id!r} already has KV blocks")
        for block in parent.blocks:
            if block is not NULL_BLOCK:
                self.pool.touch(block)
        child = parent.copy()
        self.prefix_cache.fork(child)
        self._seqs[child_id] = child
        self._version += 1

    def free(self, seq_id: object) -> None:
        """Drop `seq_id`, releasing its blocks last first.

        Blocks that reach ref count 0 join the free queue's tail in that order, so a
        sequence's tail blocks (the least shareable) are evicted before its prefix.
        """
        seq = self._seqs.pop(seq_id, None)
        if seq is None:
            raise KeyError(f"unknown sequence {seq_id!r}")
        self._version += 1
        self.prefix_cache.free(seq)
        blocks = seq.blocks
        if blocks and blocks[0] is NULL_BLOCK:  # a sliding window dropped its first ones
            blocks = [b for b in blocks if b is not NULL_BLOCK]
        self.pool.release_blocks(blocks[::-1])
        self.prefix_cache.released(blocks)

    def drop_leading(self, seq_id: object, n_blocks: int) -> list[int]:
        """Release `seq_id`'s first `n_blocks` blocks, each entry replaced by `NULL_BLOCK`: a
        sliding window left them behind (every later query's keys lie past them). Returns the
        ids released now, last first (entries dropped before are skipped, as vLLM's
        SlidingWindowManager does). A block no other table holds leaves the prefix cache
        before it rejoins the free queue: what a window dropped is no longer matchable."""
        seq = self._seq(seq_id)
        blocks = seq.blocks
        if not 0 <= n_blocks <= len(blocks):
            raise ValueError(f"sequence {seq_id!r} has {len(blocks)} blocks; cannot drop the "
                             f"first {n_blocks}")
        if not n_blocks or blocks[n_blocks - 1] is NULL_BLOCK:
            return []
        dropped: list[Block] = []
        for i in range(n_blocks - 1, -1, -1):
            block = blocks[i]
            if block is NULL_BLOCK:
                break
            blocks[i] = NULL_BLOCK
            dropped.append(block)
        seq.table_version += 1
        self.prefix_cache.dropped(dropped)
        for block in dropped:
            self.pool.release(block)
        self.prefix_cache.released(dropped)
        return [b.block_id for b in dropped]

    def truncate(self, seq_id: object, n_tokens: int) -> list[int]:
        """Roll `seq_id` back to its first `n_tokens` tokens (rejected speculative drafts).

        Blocks past the cut are released, last first (their ids are returned in that order).
        The prefix cache forgets first what the cut makes stale (`PrefixCache.truncate`): no
        later prompt may hit slots that are about to be rewritten or held tokens nobody kept.
        """
        seq = self._seq(seq_id)
        n_old = len(seq.token_ids)
        if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or not 0 <= n_tokens <= n_old:
            raise ValueError(f"sequence {seq_id!r} has {n_old} reserved tokens; cannot truncate "
                             f"it to {n_tokens!r}")
        if n_tokens == n_old:
            return []
        self.prefix_cache.truncate(seq, n_tokens)
        seq.cut_prompt_chain(n_tokens // self.block_size)
        keep = self.blocks_needed(n_tokens)
        released = seq.blocks[keep:]
        if released:
            del seq.blocks[keep:]
            seq.table_version += 1
        for block in reversed(released):
            self.pool.release(block)
        self.prefix_cache.released(released)
        if n_tokens % self.block_size:
            seq.blocks[-1].n_tokens = n_tokens % self.block_size
        del seq.token_ids[n_tokens:]
        seq.n_cached_tokens = min(seq.n_cached_tokens, n_tokens)
        seq.n_computed = min(seq.n_computed, n_tokens)
        return [b.block_id for b in reversed(released)]

    def replace_tokens(self, seq_id: object, start: int, token_ids: Sequence[int]) -> None:
        """Say that reserved slots start, start + 1, ... of `seq_id` now hold `token_ids`: a
        token tree's accepted nodes whose K/V was copied into the positions they end up at.

        Only slots whose K/V nobody may read through the prefix cache can change: none of them
        may lie in a block registered there (or found there) or shared with another sequence
        (ValueError otherwise). Counts, blocks and the free pool are untouched.
        """
        seq = self._seq(seq_id)
        n, n_old = len(token_ids), len(seq.token_ids)
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= n_old - n:
            raise ValueError(f"sequence {seq_id!r} has {n_old} reserved tokens; cannot replace "
                             f"{n} of them from position {start!r}")
        if n == 0:
            return
        bs = self.block_size
        if start < seq.n_registered * bs:
            raise ValueError(f"sequence {seq_id!r}: position {start} lies in a block of the "
                             "prefix cache; its tokens cannot change")
        for block in seq.blocks[start // bs : self.blocks_needed(start + n)]:
            if block.ref_count > 1 or block.block_hash is not None:
                raise ValueError(f"sequence {seq_id!r}: block {block.block_id} is shared or "
                                 "cached; its tokens cannot change")
        seq.token_ids[start : start + n] = [int(t) for t in token_ids]
        seq.cut_prompt_chain(start // bs)

    def mark_computed(self, seq_id: object, n_tokens: int) -> None:
        """The K/V of `seq_id`'s first `n_tokens` tokens is written: the prefix cache may now
        hand out its full blocks (hash: registered; radix: whole prompt blocks inserted).

        Call it after the model step that wrote them (a runner: after each forward, with the
        tokens computed so far); counts never go back, so a smaller `n_tokens` than before
        changes nothing.
        """
        seq = self._seq(seq_id)
        if not 0 <= n_tokens <= len(seq.token_ids):
            raise ValueError(
                f"sequence {seq_id!r} has {len(seq.token_ids)} reserved tokens; "
                f"{n_tokens} cannot be computed"
            )
        self.prefix_cache.computed(seq, n_tokens)

    def mark_computed_each(self, seq_ids: Sequence[object], n_tokens: Sequence[int]) -> None:
        """`mark_computed(seq_ids[i], n_tokens[i])` for each, in order (a step's prefill
        chunks), in one call."""
        computed = self.prefix_cache.computed if self.enable_prefix_caching else None
        for seq_id, n in zip(seq_ids, n_tokens, strict=True):
            seq = self._seq(seq_id)
            if not 0 <= n <= len(seq.token_ids):
                raise ValueError(f"sequence {seq_id!r} has {len(seq.token_ids)} reserved "
                                 f"tokens; {n} cannot be computed")
            if computed is not None:  # "none" keeps nothing of what was computed
                computed(seq, n)

    def mark_all_computed(self, seq_ids: Iterable[object]) -> None:
        """`mark_computed(seq_id, num_tokens(seq_id))` for each of `seq_ids`, live sequences
        whose every reserved token's K/V is now written (a decode step), in one call."""
        if self.enable_prefix_caching:  # "none" keeps nothing of what was computed
            self.prefix_cache.computed_all(map(self._seqs.__getitem__, seq_ids))

    def _n_reserved(self, n_prompt: int, n_cached: int, n_new_tokens: int | None) -> int:
        """How many tokens `allocate` reserves: the whole prompt, or the cached prefix and
        `n_new_tokens` more (chunked prefill)."""
        return n_prompt if n_new_tokens is None else min(n_prompt, n_cached + n_new_tokens)

    def _table(self, hits: list[Block], n_tokens: int) -> list[Block]:
        """A new block table for `n_tokens` tokens: the (touched) hit blocks, then fresh ones,
        each full but the last."""
        bs, pool = self.block_size, self.pool
        need = self.blocks_needed(n_tokens)
        blocks = hits + pool.allocate_blocks(need - len(hits), bs)
        blocks[-1].n_tokens = n_tokens - (need - 1) * bs
        return blocks

    def _check_prompt(self, token_ids: Sequence[int], n_new_tokens: int | None) -> None:
        if not len(token_ids):
            raise ValueError("cannot allocate KV for an empty prompt")
        if n_new_tokens is not None and n_new_tokens < 1:
            raise ValueError(f"n_new_tokens must be positive, got {n_new_tokens}")
        self._check_capacity(len(token_ids))

    # ---- model-facing tensors ----------------------------------------------------------------------

    def slot_mapping(self, seq_id: object, positions: Iterable[int] | torch.Tensor) -> torch.Tensor:
        """Flat cache slots (int64) of `seq_id`'s tokens at `positions`:

            slot = block_table[pos // block_size] * block_size + pos % block_size
        """
        return forward_tensors.slot_mapping(self._seq(seq_id), positions, self.block_size,
                                            seq_id)

    def block_table_tensor(
        self, seq_ids: Sequence[object], device: torch.device | str | None = None, pad: int = 0
    ) -> torch.Tensor:
        """int32 [n_seqs, max_blocks] block tables, short rows padded with `pad`.

        Padding entries are never read: attention masks keys at or past `context_lens`.
        """
        return forward_tensors.block_table_tensor([self._seq(s) for s in seq_ids], device, pad)

    def context_lens_tensor(
        self, seq_ids: Sequence[object], device: torch.device | str | None = None
    ) -> torch.Tensor:
        """int32 [n_seqs]: reserved tokens per sequence (the keys attention reads)."""
        return forward_tensors.context_lens_tensor([self._seq(s) for s in seq_ids], device)

    # ---- statistics --------------------------------------------------------------------------------

    def stats(self, step: int = 0) -> KVStats:
        """The pool as a frozen record (O(n_blocks))."""
        return block_stats.paged_stats(
            self.pool, self._seqs, step=step, prefix_hit_tokens=self.prefix_hit_tokens,
            prefix_query_tokens=self.prefix_query_tokens, evictions=self.n_evicted_blocks,
            bytes_per_slot=self.bytes_per_slot,
        )

    def pool_state(self) -> KVPoolState:
        """Every block's state, owner, ref count and fill, for the block grid (O(n_blocks))."""
        return block_stats.paged_pool_state(self.pool, self._seqs, self.radix)

    def table_state(self, seq_id: object) -> tuple[object, int, list]:
        """(the sequence's record, its table version, its blocks) for a persistent copy of
        the block table (engines/kv/input_batch): the record changes when the id is freed and
        allocated again, the version when an entry is replaced or removed; the blocks are
        the live list, to read, not to change."""
        seq = self._seq(seq_id)
        return seq, seq.table_version, seq.blocks

    def _seq(self, seq_id: object) -> SeqBlocks:
        try:
            return self._seqs[seq_id]
        except KeyError:
            raise KeyError(f"unknown sequence {seq_id!r}") from None
