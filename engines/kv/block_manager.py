"""Per-sequence block tables over a `BlockPool`: the paged KV allocator a model runner drives.

Each sequence owns a block table (logical block i -> physical block) and the token ids whose
K/V its slots hold or are about to hold. The life of a sequence:

    n_cached = mgr.allocate(seq, prompt_ids)   # reserve the prompt; the first n_cached tokens'
                                               # K/V are already in the cache (prefix hit)
    # prefill: run tokens [n_cached, len(prompt)), writing K/V to mgr.slot_mapping(seq, ...)
    mgr.mark_computed(seq, len(prompt_ids))    # their K/V is written: full blocks become hits
    cow = mgr.append_token(seq, next_id)       # reserve one more slot; copy-on-write if the
                                               # last block was shared: copy KV block src->dst
    mgr.fork(seq, seq2)                        # parallel sampling: share every block
    mgr.free(seq)                              # release the tail first

Slot s of the flat cache is block s // block_size, offset s % block_size. A full block enters
the prefix cache only when the caller says its K/V is written (`mark_computed`), not when it is
reserved: a prompt reserved whole but prefilled in chunks, or a sequence stepped after
another that shares its prefix, must not hand out blocks whose K/V nobody wrote yet.

This module is the bookkeeping (block tables: allocate, append, fork, copy-on-write, truncate,
free). The manager composes the other jobs, one module each: `prefix_hashing` (the hash chain
along a table), `radix_blocks` (the radix tree over the pool), `forward_tensors` (slot
mappings, block tables and context lengths for the forward) and `block_stats` (the figures
and the block grid the views draw).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from inferlab.engines.kv import block_stats, forward_tensors
from inferlab.engines.kv import prefix_cache as prefix_index
from inferlab.engines.kv.block_pool import DEFAULT_BLOCK_SIZE, BlockPool
from inferlab.engines.kv.errors import KVCapacityError, KVOutOfMemoryError
from inferlab.engines.kv.free_queue import Block
from inferlab.engines.kv.pool_state import KVPoolState
from inferlab.engines.kv.prefix_cache import ROOT_CONTENT_ID, ROOT_HASH
from inferlab.engines.kv.prefix_hashing import PrefixHashing
from inferlab.engines.kv.radix_blocks import RadixBlocks
from inferlab.engines.kv.seq_blocks import SeqBlocks
from inferlab.engines.kv.stats import KVStats

PREFIX_CACHES = ("hash", "radix", "none")
"""How a manager finds cached prefixes: vLLM's chained block hashes, SGLang's radix tree over
token ids, or not at all."""


class BlockManager:
    """Paged KV allocation with reference counts, copy-on-write and automatic prefix caching.

    Block ids run 0..n_blocks-1 and are first handed out in that order. `hash_fn(parent_hash,
    token_tuple) -> int` is the chained block hash (default `prefix_cache.hash_block_tokens`,
    looked up when the manager is built, so tests may monkeypatch it).

    `prefix_cache` (one of PREFIX_CACHES) overrides `enable_prefix_caching` (True = "hash").
    With "radix" a `RadixBlocks` tree of `radix_page_size`-token pages finds prefixes: a hit
    may end inside a block (its K/V is copied into a fresh one: `take_copies`); a sequence's
    computed prompt blocks are cached as they are computed (`mark_computed`), everything it
    computed when it is freed; unlocked tree nodes are evicted, `eviction_policy` order, when
    an allocation finds too few free blocks.
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
        if prefix_cache not in PREFIX_CACHES:
            raise ValueError(f"prefix_cache must be one of {', '.join(PREFIX_CACHES)}, "
                             f"got {prefix_cache!r}")
        self.prefix_cache = prefix_cache
        self.pool = BlockPool(n_blocks, block_size, prefix_cache == "hash")
        self.block_size = block_size
        self.n_blocks = n_blocks
        self.enable_prefix_caching = prefix_cache != "none"
        self.radix = (RadixBlocks(self.pool, radix_page_size, eviction_policy)
                      if prefix_cache == "radix" else None)
        self._copies: list[tuple[int, int]] = []
        self.bytes_per_slot = bytes_per_slot
        # the default looked up now, not at import: tests monkeypatch prefix_cache's function
        if hash_fn is None:
            hash_fn = prefix_index.hash_block_tokens
        self.hashing = PrefixHashing(self.pool, hash_fn) if prefix_cache == "hash" else None
        """The hash chain along block tables ("hash" caching), else None."""
        self._seqs: dict[object, SeqBlocks] = {}
        self.prefix_query_tokens = 0
        """Prompt tokens looked up in the prefix cache, ever."""
        self.prefix_hit_tokens = 0
        """Prompt tokens whose K/V a prefix hit supplied, ever."""

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
        if self.radix is not None:
            return self.radix.n_available()
        return self.pool.n_free

    @property
    def n_evicted_blocks(self) -> int:
        """Cached blocks whose K/V eviction gave up, ever: a hash cache's cached-free blocks
        reused, a radix tree's blocks freed by evicting its nodes."""
        return self.pool.n_evictions if self.radix is None else self.radix.n_evicted_blocks

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
        if self.radix is not None:
            return [b.block_id for b in self.pool.blocks if b.tree_refs]
        return sorted(b.block_id for b in self.pool.cache)

    def cached_prefix_len(self, token_ids: Sequence[int]) -> int:
        """How many leading tokens of a prompt a prefix hit would supply now, changing nothing
        (what a cache-aware scheduler ranks by)."""
        if self.radix is not None:
            return len(self.radix.peek(token_ids))
        if self.hashing is None or not len(token_ids):
            return 0
        return len(self.hashing.find_cached_prefix(token_ids)[0]) * self.block_size

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
        self, tokens: int | Sequence[int], n_new_tokens: int | None = None
    ) -> bool:
        """Whether a prompt fits in the free blocks now.

        `tokens` is a token count (assumes no prefix hit: conservative) or the prompt's token
        ids (counts exactly what `allocate(seq, tokens, n_new_tokens)` would take). Raises
        `KVCapacityError` when the prompt can never fit, so a scheduler refuses it instead of
        waiting forever.
        """
        if isinstance(tokens, int):
            self._check_capacity(tokens)
            n = tokens if n_new_tokens is None else min(tokens, n_new_tokens)
            return self.blocks_needed(n) <= self.pool.n_free
        if self.radix is not None:
            self._check_prompt(tokens, n_new_tokens)
            slots = self.radix.peek(tokens)
            n_reserve, hits, _src = self._plan_radix(tokens, n_new_tokens, slots)
            need = self.blocks_needed(n_reserve) - len(hits)
            return need <= self.radix.n_available(self.radix.pinned_by(slots))
        hits, _, _, n_reserve = self._plan(tokens, n_new_tokens)
        return self._fits(self.blocks_needed(n_reserve), hits)

    def can_append(self, seq_id: object, n_tokens: int = 1) -> bool:
        """Whether `append_tokens(seq_id, n_tokens ids)` would find its blocks free now."""
        seq = self._seq(seq_id)
        need = self._append_blocks_needed(seq, n_tokens)
        return need <= self.pool.n_free or need <= self.n_free_blocks

    def _fits(self, need: int, hits: list[Block]) -> bool:
        revived = sum(1 for b in hits if b.ref_count == 0)
        return need - len(hits) <= self.pool.n_free - revived

    # ---- allocation ----------------------------------------------------------------------------

    def allocate(
        self, seq_id: object, token_ids: Sequence[int], n_new_tokens: int | None = None
    ) -> int:
        """Reserve slots for a prompt; return how many leading tokens the prefix cache supplied.

        Prefix hits are whole blocks, and only blocks within the first len-1 tokens are
        looked up: the last prompt token is always recomputed (its logits start decoding).
        `n_new_tokens` reserves the cached prefix plus at most that many more tokens, for
        chunked prefill: the rest of the prompt follows with `append_tokens`.
        """
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id!r} already has KV blocks")
        if self.radix is not None:
            return self._allocate_radix(seq_id, token_ids, n_new_tokens)
        hits, chain_hash, chain_id, n = self._plan(token_ids, n_new_tokens)
        need = self.blocks_needed(n)
        if not self._fits(need, hits):
            raise KVOutOfMemoryError(
                f"sequence {seq_id!r} needs {need - len(hits)} free KV blocks, "
                f"{self.pool.n_free} are free"
            )
        for block in hits:  # revive hits before allocating, so none of them is evicted
            self.pool.touch(block)
        n_cached = len(hits) * self.block_size
        seq = SeqBlocks(self._table(hits, n), list(token_ids[:n]), n_cached)
        seq.chain_hash, seq.chain_id, seq.n_registered = chain_hash, chain_id, len(hits)
        if self.hashing is not None:
            self.prefix_query_tokens += len(token_ids)
            self.prefix_hit_tokens += n_cached
        self._seqs[seq_id] = seq
        return n_cached

    def append_token(self, seq_id: object, token_id: int) -> tuple[int, int] | None:
        """Reserve the slot for one more token of `seq_id`.

        Returns `(src, dst)` when the last block was shared (after a fork): `seq_id` now owns
        a fresh copy `dst`, and the caller must copy block `src`'s K/V into it
        (`PagedKVCache.copy_blocks`) before writing the new token. Otherwise None.
        """
        if self._append_in_place(seq_id, token_id):
            return None
        cows = self.append_tokens(seq_id, (token_id,))
        return cows[0] if cows else None

    def try_append_token(self, seq_id: object, token_id: int
                         ) -> tuple[bool, tuple[int, int] | None]:
        """`append_token` if `can_append(seq_id)`: (True, its copy-on-write pair or None);
        (False, None), nothing changed, when no block is free. One call per decode: the
        scheduler's hot path."""
        if self._append_in_place(seq_id, token_id):
            return True, None
        if not self.can_append(seq_id, 1):
            return False, None
        cows = self.append_tokens(seq_id, (token_id,))
        return True, (cows[0] if cows else None)

    def _append_in_place(self, seq_id: object, token_id: int) -> bool:
        """The append fast path (a decode): when `seq_id`'s last block has room and no other
        table holds it, take its next slot and return True; otherwise change nothing and
        return False (`append_tokens` then does the whole job)."""
        seq = self._seqs.get(seq_id)
        if seq is None:
            return False
        tokens = seq.token_ids
        if len(tokens) % self.block_size:
            last = seq.blocks[-1]
            if last.ref_count == 1:
                tokens.append(token_id)
                last.n_tokens += 1
                return True
        return False

    def append_tokens(self, seq_id: object, token_ids: Sequence[int]) -> list[tuple[int, int]]:
        """Reserve slots for several tokens (chunked prefill, speculative drafts).

        Returns the copy-on-write pairs (at most one). All or nothing: on
        `KVOutOfMemoryError` / `KVCapacityError` the sequence is unchanged.
        """
        seq = self._seq(seq_id)
        n_new = len(token_ids)
        if n_new == 0:
            return []
        self._check_capacity(len(seq.token_ids) + n_new, f"sequence {seq_id!r}")
        need = self._append_blocks_needed(seq, n_new)
        if need > self.n_free_blocks:
            raise KVOutOfMemoryError(
                f"sequence {seq_id!r} needs {need} free KV blocks to grow, "
                f"{self.n_free_blocks} are free"
            )
        if self.radix is not None:
            self.radix.ensure_free(need)
        pool, bs, blocks, tokens = self.pool, self.block_size, seq.blocks, seq.token_ids
        cows: list[tuple[int, int]] = []
        n_old = len(tokens)
        if n_old % bs:
            last = blocks[-1]
            if last.ref_count > 1:  # copy-on-write: the partial block is shared
                fresh = pool.allocate_block()
                fresh.n_tokens = last.n_tokens
                pool.release(last)
                if self.radix is not None:
                    self.radix.recheck((last,))
                blocks[-1] = fresh
                seq.table_version += 1
                cows.append((last.block_id, fresh.block_id))
        tokens.extend(token_ids)
        pos = n_old
        n_total = len(tokens)
        while pos < n_total:
            if pos % bs == 0:
                blocks.append(pool.allocate_block())
            block = blocks[-1]
            take = min(bs - pos % bs, n_total - pos)
            block.n_tokens += take
            pos += take
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
            self.pool.touch(block)
        child = SeqBlocks(list(parent.blocks), list(parent.token_ids), parent.n_cached_tokens)
        child.chain_hash, child.chain_id = parent.chain_hash, parent.chain_id
        child.n_registered = parent.n_registered
        child.n_prompt, child.n_computed = parent.n_prompt, parent.n_computed
        child.n_inserted, child.radix_node = parent.n_inserted, parent.radix_node
        child.radix_pos = parent.radix_pos
        if self.radix is not None:
            if child.radix_node is not None:
                self.radix.lock(child.radix_node)
            self.radix.recheck(child.blocks)
        self._seqs[child_id] = child

    def free(self, seq_id: object) -> None:
        """Drop `seq_id`, releasing its blocks last first.

        Blocks that reach ref count 0 join the free queue's tail in that order, so a
        sequence's tail blocks (the least shareable) are evicted before its prefix.
        """
        seq = self._seqs.pop(seq_id, None)
        if seq is None:
            raise KeyError(f"unknown sequence {seq_id!r}")
        if self.radix is not None:  # cache what it computed before its blocks go
            if seq.n_computed:
                self.radix.insert(seq.token_ids, seq.blocks, seq.n_computed,
                                  self._radix_start(seq))
            if seq.radix_node is not None:
                self.radix.unlock(seq.radix_node)
        release = self.pool.release
        for block in reversed(seq.blocks):
            release(block)
        if self.radix is not None:
            self.radix.recheck(seq.blocks)

    def truncate(self, seq_id: object, n_tokens: int) -> list[int]:
        """Roll `seq_id` back to its first `n_tokens` tokens (rejected speculative drafts).

        Blocks past the cut are released, last first (their ids are returned in that order).
        A block this sequence alone holds that was registered in the prefix cache and no longer
        lies wholly inside the kept tokens is unregistered first: its slots are about to be
        rewritten (the kept partial block) or held tokens nobody committed (a released one), so
        no later prompt may hit it. A registered block another sequence shares keeps its entry:
        its content stays valid for that holder, and the next append here copies it first.
        """
        seq = self._seq(seq_id)
        n_old = len(seq.token_ids)
        if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or not 0 <= n_tokens <= n_old:
            raise ValueError(f"sequence {seq_id!r} has {n_old} reserved tokens; cannot truncate "
                             f"it to {n_tokens!r}")
        if n_tokens == n_old:
            return []
        bs, pool = self.block_size, self.pool
        n_full = n_tokens // bs
        keep = self.blocks_needed(n_tokens)
        for block in seq.blocks[n_full:]:
            if block.block_hash is not None and block.ref_count == 1:
                pool.cache.evict(block)
        released = seq.blocks[keep:]
        if released:
            del seq.blocks[keep:]
            seq.table_version += 1
        for block in reversed(released):
            pool.release(block)
        if self.radix is not None:
            self.radix.recheck(released)
        if n_tokens % bs:
            seq.blocks[-1].n_tokens = n_tokens % bs
        del seq.token_ids[n_tokens:]
        seq.n_cached_tokens = min(seq.n_cached_tokens, n_tokens)
        seq.n_computed = min(seq.n_computed, n_tokens)
        if self.radix is not None:  # the tree keeps its copy; a shared kept block is
            seq.n_inserted = min(seq.n_inserted, n_tokens)  # copied before the next write
            seq.n_registered = min(seq.n_registered, n_full)
            if n_tokens < seq.radix_pos:  # its locked node's path is no longer its prefix
                seq.radix_pos = -1
        elif seq.n_registered > n_full:  # only a hash chain registers outside the tree
            self.hashing.rewind(seq, n_full)
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

    # ---- prefix cache ----------------------------------------------------------------------------

    def mark_computed(self, seq_id: object, n_tokens: int) -> None:
        """The K/V of `seq_id`'s first `n_tokens` tokens is written: cache its full blocks.

        Every full block within those tokens that is not in the prefix cache yet is registered
        there, so later requests with the same prefix hit it. Call it after the model step
        that wrote them (a runner: after each forward, with the tokens computed so far);
        counts never go back, so a smaller `n_tokens` than before changes nothing.
        """
        seq = self._seq(seq_id)
        if not 0 <= n_tokens <= len(seq.token_ids):
            raise ValueError(
                f"sequence {seq_id!r} has {len(seq.token_ids)} reserved tokens; "
                f"{n_tokens} cannot be computed"
            )
        if self.radix is not None:
            self._mark_computed_radix(seq, n_tokens)
        elif self.hashing is not None:
            self.hashing.register_computed(seq, n_tokens)

    def _mark_computed_radix(self, seq: SeqBlocks, n_tokens: int) -> None:
        """Cache the prompt's computed whole blocks in the tree as they are computed (later
        prompts sharing them hit while this one still runs), and move this sequence's lock to
        where they end. Only whole prompt blocks: the tree holding the block a sequence still
        writes into would make its next append copy that block."""
        if n_tokens > seq.n_computed:
            seq.n_computed = n_tokens
        bs = self.block_size
        n_ins = min(n_tokens, seq.n_prompt) // bs * bs
        if n_ins <= seq.n_inserted:  # a decode, or no whole prompt block more
            return
        node = self.radix.insert(seq.token_ids, seq.blocks, n_ins, self._radix_start(seq))
        self.radix.lock(node)
        if seq.radix_node is not None:
            self.radix.unlock(seq.radix_node)
        page = self.radix.tree.page_size
        seq.radix_node, seq.n_inserted, seq.radix_pos = node, n_ins, n_ins - n_ins % page
        seq.n_registered = max(seq.n_registered, n_ins // bs)

    def _plan(
        self, token_ids: Sequence[int], n_new_tokens: int | None
    ) -> tuple[list[Block], int, int, int]:
        """Prefix hits, the chain after them, and how many tokens `allocate` reserves."""
        n = len(token_ids)
        self._check_prompt(token_ids, n_new_tokens)
        if self.hashing is None:
            hits, chain_hash, chain_id = [], ROOT_HASH, ROOT_CONTENT_ID
        else:
            hits, chain_hash, chain_id = self.hashing.find_cached_prefix(token_ids)
        n_reserve = n
        if n_new_tokens is not None:
            n_reserve = min(n, len(hits) * self.block_size + n_new_tokens)
        return hits, chain_hash, chain_id, n_reserve

    def _table(self, hits: list[Block], n_tokens: int) -> list[Block]:
        """A new block table for `n_tokens` tokens: the (touched) hit blocks, then fresh ones,
        each full but the last."""
        bs, pool = self.block_size, self.pool
        need = self.blocks_needed(n_tokens)
        blocks = hits + [pool.allocate_block() for _ in range(need - len(hits))]
        for block in blocks[len(hits) :]:
            block.n_tokens = bs
        blocks[-1].n_tokens = n_tokens - (need - 1) * bs
        return blocks

    def _check_prompt(self, token_ids: Sequence[int], n_new_tokens: int | None) -> None:
        if not len(token_ids):
            raise ValueError("cannot allocate KV for an empty prompt")
        if n_new_tokens is not None and n_new_tokens < 1:
            raise ValueError(f"n_new_tokens must be positive, got {n_new_tokens}")
        self._check_capacity(len(token_ids))

    @staticmethod
    def _radix_start(seq: SeqBlocks):
        """Where an insert of `seq`'s tokens may begin: the node it locks, whose path is its
        first radix_pos tokens (None after a rollback cut into them: from the root)."""
        if seq.radix_node is None or seq.radix_pos < 0:
            return None
        return seq.radix_node, seq.radix_pos

    def _plan_radix(self, token_ids: Sequence[int], n_new_tokens: int | None,
                    slots: Sequence[int]) -> tuple[int, list[Block], Block | None]:
        """`_plan` for a radix hit of `slots`: how many tokens `allocate` reserves, the whole
        blocks it shares, the block its partial last block is copied from."""
        n = len(token_ids)
        hits, src = self.radix.blocks_of(slots)
        return (n if n_new_tokens is None else min(n, len(slots) + n_new_tokens)), hits, src

    def _allocate_radix(self, seq_id: object, token_ids: Sequence[int],
                        n_new_tokens: int | None) -> int:
        radix, pool = self.radix, self.pool
        self._check_prompt(token_ids, n_new_tokens)
        slots, node = radix.match(token_ids)
        n, hits, src = self._plan_radix(token_ids, n_new_tokens, slots)
        need = self.blocks_needed(n)
        available = radix.n_available(radix.pinned_by(slots))  # the lock below pins them
        if need - len(hits) > available:
            raise KVOutOfMemoryError(
                f"sequence {seq_id!r} needs {need - len(hits)} free KV blocks, "
                f"{available} are free or evictable"
            )
        radix.lock(node)  # pins the hit (and the block its partial page is copied from)
        for block in hits:
            pool.touch(block)
        radix.ensure_free(need - len(hits))
        blocks = self._table(hits, n)
        if src is not None:
            self._copies.append((src.block_id, blocks[len(hits)].block_id))
        n_cached = len(slots)
        seq = SeqBlocks(blocks, list(token_ids[:n]), n_cached)
        seq.n_prompt = len(token_ids)
        seq.n_registered, seq.radix_node, seq.radix_pos = len(hits), node, n_cached
        self.prefix_query_tokens += len(token_ids)
        self.prefix_hit_tokens += n_cached
        radix.recheck(hits)
        self._seqs[seq_id] = seq
        return n_cached

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
