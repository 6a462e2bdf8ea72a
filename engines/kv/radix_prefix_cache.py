"""The "radix" prefix-cache strategy: SGLang's radix tree over token ids (`radix_cache`) whose
slots are a block pool's (`radix_blocks`), behind the `prefix_cache.PrefixCache` interface.

A hit may end inside a block: the new table gets a fresh block and its K/V is copied from the
block holding the hit's last slot (`PrefixHit.copy_src`). A sequence caches its computed whole
prompt blocks as they are computed (later prompts sharing them hit while it still runs) and
everything it computed when it is freed; it locks the tree node its cached prefix ends on, so
that prefix is never evicted under it. Unlocked nodes are evicted, `eviction_policy` order,
when an allocation finds too few free blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from inferlab.engines.kv.block_pool import BlockPool
from inferlab.engines.kv.free_queue import Block
from inferlab.engines.kv.prefix_cache import PrefixCache, PrefixHit
from inferlab.engines.kv.radix_blocks import RadixBlocks
from inferlab.engines.kv.seq_blocks import SeqBlocks


class RadixPrefixCache(PrefixCache):
    """The tree of `page_size`-token pages over `pool`. A sequence's radix fields
    (`SeqBlocks.n_prompt`, `n_computed`, `n_inserted`, `radix_node`, `radix_pos`) say what of it
    the tree holds and which node it locks."""

    name = "radix"
    match_changes_nothing = False  # a match splits the node it ends inside, marks the path

    def __init__(self, pool: BlockPool, page_size: int = 1, eviction_policy: str = "lru"
                 ) -> None:
        super().__init__(pool)
        self.radix = RadixBlocks(pool, page_size, eviction_policy)

    # ---- the pool ----------------------------------------------------------------------------

    def n_available(self) -> int:
        return self.radix.n_available()

    @property
    def n_evicted_blocks(self) -> int:
        """Blocks freed by evicting tree nodes, ever."""
        return self.radix.n_evicted_blocks

    def make_room(self, n_blocks: int) -> None:
        self.radix.ensure_free(n_blocks)

    def released(self, blocks: Iterable[Block]) -> None:
        self.radix.recheck(blocks)

    # ---- lookups -----------------------------------------------------------------------------

    def cached_block_ids(self) -> list[int]:
        """Blocks the tree holds (in use or only by the tree), sorted."""
        return [b.block_id for b in self.pool.blocks if b.tree_refs]

    def cached_prefix_len(self, token_ids: Sequence[int]) -> int:
        return len(self.radix.peek(token_ids))

    def match(self, token_ids: Sequence[int], peek: bool = False) -> PrefixHit:
        """Whole blocks up to the last matched one, the partial one's copy source; what is
        available excludes every block a matched slot lies in (locking the hit pins them)."""
        radix = self.radix
        if peek:
            slots, node = radix.peek(token_ids), None
        else:  # splits the node the match ends inside, marks the path hit
            slots, node = radix.match(token_ids)
        hits, src = radix.blocks_of(slots)
        return PrefixHit(hits, len(slots), radix.n_available(radix.pinned_by(slots)), src,
                         node)

    def claim(self, hit: PrefixHit, n_prompt_tokens: int, n_new_blocks: int) -> None:
        self.radix.lock(hit.where)  # pins the hit (and the block its partial page is copied from)
        super().claim(hit, n_prompt_tokens, n_new_blocks)
        self.radix.ensure_free(n_new_blocks)
        self.query_tokens += n_prompt_tokens
        self.hit_tokens += hit.n_tokens

    # ---- a sequence's life -------------------------------------------------------------------

    def attach(self, seq: SeqBlocks, hit: PrefixHit) -> None:
        seq.n_registered, seq.radix_node, seq.radix_pos = len(hit.blocks), hit.where, hit.n_tokens
        self.radix.recheck(hit.blocks)

    def computed(self, seq: SeqBlocks, n_tokens: int) -> None:
        """Insert the prompt's computed whole blocks and move the lock to where they end. Only
        whole prompt blocks: the tree holding the block a sequence still writes into would
        make its next append copy that block."""
        if n_tokens > seq.n_computed:
            seq.n_computed = n_tokens
        bs = self.block_size
        n_ins = min(n_tokens, seq.n_prompt) // bs * bs
        if n_ins <= seq.n_inserted:  # a decode, or no whole prompt block more
            return
        radix = self.radix
        node = radix.insert(seq.token_ids, seq.blocks, n_ins, _start(seq))
        radix.lock(node)
        if seq.radix_node is not None:
            radix.unlock(seq.radix_node)
        page = radix.tree.page_size
        seq.radix_node, seq.n_inserted, seq.radix_pos = node, n_ins, n_ins - n_ins % page
        seq.n_registered = max(seq.n_registered, n_ins // bs)

    def computed_all(self, seqs: Iterable[SeqBlocks]) -> None:
        bs = self.block_size
        for seq in seqs:
            n = len(seq.token_ids)
            if n > seq.n_computed:
                seq.n_computed = n
            if min(n, seq.n_prompt) // bs * bs > seq.n_inserted:  # else `computed` stops there
                self.computed(seq, n)

    def fork(self, child: SeqBlocks) -> None:
        if child.radix_node is not None:
            self.radix.lock(child.radix_node)
        self.radix.recheck(child.blocks)

    def free(self, seq: SeqBlocks) -> None:
        """Cache what it computed before its blocks go; let go of its lock."""
        if seq.n_computed:
            self.radix.insert(seq.token_ids, seq.blocks, seq.n_computed, _start(seq))
        if seq.radix_node is not None:
            self.radix.unlock(seq.radix_node)

    def truncate(self, seq: SeqBlocks, n_tokens: int) -> None:
        """The tree keeps its copy of the cut tokens (a kept block it shares is copied before
        the next write); a lock whose path reaches past the cut no longer spells the
        sequence's prefix, so later inserts walk from the root."""
        seq.n_inserted = min(seq.n_inserted, n_tokens)
        seq.n_registered = min(seq.n_registered, n_tokens // self.block_size)
        if n_tokens < seq.radix_pos:
            seq.radix_pos = -1


def _start(seq: SeqBlocks):
    """Where an insert of `seq`'s tokens may begin: the node it locks, whose path is its first
    radix_pos tokens (None after a rollback cut into them: from the root)."""
    if seq.radix_node is None or seq.radix_pos < 0:
        return None
    return seq.radix_node, seq.radix_pos
