"""`KVCacheCoordinator`: one block table per layer group, a sliding group's blocks dropped
behind its window (vLLM's hybrid KV cache manager: `kv_cache_coordinator.py` over one
`SlidingWindowManager` or `FullAttentionManager` per group).

Each group (`kv_groups.LayerGroup`) is a `BlockManager` over a pool of its own; every
sequence has one table in each, all over the same tokens. The scheduler and the runner drive
the coordinator as they drive a BlockManager (the same methods), and every call goes to
every group:

    allocate     the prefix hit every group can supply (the shortest) is taken in each
    append_*     each group reserves the same slots; a group that runs short undoes the
                 others', so the groups never disagree on a sequence's tokens (no
                 `append_token`: one token may copy a shared block in every group, so its
                 copy-on-write pairs are a list, `append_each`'s)
    mark_*       each group registers its computed blocks
    fork / free / truncate / replace_tokens   in each group

A sliding group of window W drops (`BlockManager.drop_leading`) every block wholly before
floor - W + 1, where floor = min(tokens computed, where the latest reservation started), at
each reservation and after each step marks tokens computed. A query at p reads keys
p - W + 1 .. p, and every query still to run is at floor or after (a step runs the pending
tokens; speculative decoding rolls back no further than the start of the drafts it reserved),
so no query reads a dropped block. A `truncate` that would need one raises instead. Past the
window a sequence's table in that group holds at most ⌈W / block_size⌉ + 1 blocks.

A dropped block rejoins its pool's free queue and leaves the prefix cache (no later prompt
can hit it): a group's hits are whole blocks from the prompt's start, so once a sequence's
window has passed its prompt, a sliding group has no hit for that prompt, and neither has the
model. The radix strategy is not offered (its tree cannot lose a block in the middle).

What a single-group method returns for one table (`block_table`, `slot_mapping`, `stats`,
`pool_state`, ...) is the first group's: the full-attention layers where the model has them.
Block ids leaving the coordinator (copy-on-write pairs, released blocks) are group-qualified
(`kv_groups.group_block_id`); with one group they are the plain ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from inferlab.engines.kv.block_manager import BlockManager, SeqTables
from inferlab.engines.kv.block_pool import DEFAULT_BLOCK_SIZE
from inferlab.engines.kv.errors import KVOutOfMemoryError
from inferlab.engines.kv.free_queue import NULL_BLOCK
from inferlab.engines.kv.kv_groups import LayerGroup, group_block_id
from inferlab.engines.kv.pool_state import KVPoolState
from inferlab.engines.kv.stats import KVStats


@dataclass(frozen=True)
class GroupHeld:
    """One layer group's blocks, summed over the live sequences (a block two tables share
    counted in each): those its tables hold, and those a cache that keeps every token would
    hold, ⌈tokens / block_size⌉ each."""

    group: LayerGroup
    blocks_held: int
    blocks_full: int
    bytes_per_block: int
    """block_size × this group's layers' K/V bytes per token."""
    blocks_used: int = 0
    """Distinct blocks of the group's pool in use (a shared block once): its memory taken."""

    @property
    def held_bytes(self) -> int:
        return self.blocks_held * self.bytes_per_block

    @property
    def full_bytes(self) -> int:
        return self.blocks_full * self.bytes_per_block


class GroupTables(tuple):
    """`KVCacheCoordinator.tables`: each group's `SeqTables`, in group order."""


class KVCacheCoordinator:
    """Paged KV allocation for a model with layer groups: a `BlockManager` per group (each
    `n_blocks` blocks of `block_size` tokens), one table per sequence in each.

    `prefix_cache` ("hash" or "none"; None: `enable_prefix_caching`) is every group's;
    `bytes_per_slot` is the whole model's K/V bytes per token, split over the groups by
    their layers.
    """

    def __init__(self, groups: Sequence[LayerGroup], n_blocks: int,
                 block_size: int = DEFAULT_BLOCK_SIZE, enable_prefix_caching: bool = True,
                 hash_fn=None, bytes_per_slot: int = 0, prefix_cache: str | None = None
                 ) -> None:
        if prefix_cache is None:
            prefix_cache = "hash" if enable_prefix_caching else "none"
        if prefix_cache == "radix":
            raise ValueError("the radix prefix cache cannot follow a sliding window's dropped "
                             "blocks; use 'hash' or 'none' with layer groups")
        if not groups:
            raise ValueError("a coordinator needs at least one layer group")
        self.groups = tuple(groups)
        n_layers = sum(len(g.layers) for g in self.groups)
        self.managers = tuple(
            BlockManager(n_blocks, block_size, hash_fn=hash_fn, prefix_cache=prefix_cache,
                         bytes_per_slot=bytes_per_slot * len(g.layers) // n_layers)
            for g in self.groups)
        """One BlockManager per group, in group order."""
        self.layer_group = tuple(g for _layer, g in sorted(
            (layer, g) for g, group in enumerate(self.groups) for layer in group.layers))
        """The group index of each model layer."""
        self.n_blocks = n_blocks
        self.block_size = block_size
        self.bytes_per_slot = bytes_per_slot
        self.enable_prefix_caching = prefix_cache != "none"
        self.prefix_cache = self.managers[0].prefix_cache
        """The first group's strategy (its `name` is every group's)."""
        self.radix = None
        self._sliding = tuple((g, m, group.window) for g, (group, m)
                              in enumerate(zip(self.groups, self.managers, strict=True))
                              if group.window)
        self._computed: dict[object, int] = {}
        self._start: dict[object, int] = {}  # where the latest reservation started

    # ---- queries ---------------------------------------------------------------------------

    def __contains__(self, seq_id: object) -> bool:
        return seq_id in self.managers[0]

    @property
    def seq_ids(self) -> list:
        return self.managers[0].seq_ids

    @property
    def n_free_blocks(self) -> int:
        """The fewest blocks any group may take now (the group that runs short first)."""
        return min(m.n_free_blocks for m in self.managers)

    @property
    def n_evicted_blocks(self) -> int:
        return sum(m.n_evicted_blocks for m in self.managers)

    @property
    def prefix_query_tokens(self) -> int:
        return self.managers[0].prefix_query_tokens

    @property
    def prefix_hit_tokens(self) -> int:
        """Prompt tokens a hit supplied (the same hit in every group)."""
        return self.managers[0].prefix_hit_tokens

    @property
    def prefix_hit_rate(self) -> float:
        return self.managers[0].prefix_hit_rate

    def block_table(self, seq_id: object) -> list[int]:
        """The first group's table of `seq_id` (`group_tables`: every group's)."""
        return self.managers[0].block_table(seq_id)

    def group_tables(self, seq_id: object) -> tuple[list[int], ...]:
        """`seq_id`'s table in each group, in group order (-1 where a block was dropped)."""
        return tuple(m.block_table(seq_id) for m in self.managers)

    def num_tokens(self, seq_id: object) -> int:
        return self.managers[0].num_tokens(seq_id)

    def token_ids(self, seq_id: object) -> list[int]:
        return self.managers[0].token_ids(seq_id)

    def num_cached_tokens(self, seq_id: object) -> int:
        return self.managers[0].num_cached_tokens(seq_id)

    def cached_prefix_len(self, token_ids: Sequence[int]) -> int:
        """The hit an allocation would take now: the shortest over the groups."""
        return min(m.cached_prefix_len(token_ids) for m in self.managers)

    def take_copies(self) -> list[tuple[int, int]]:
        return [(self._id(g, s), self._id(g, d)) for g, m in enumerate(self.managers)
                for s, d in m.take_copies()]

    def held(self) -> tuple[GroupHeld, ...]:
        """Each group's blocks held against keeping every token (`GroupHeld`)."""
        out = []
        for group, m in zip(self.groups, self.managers, strict=True):
            held = full = 0
            for seq_id in m.seq_ids:
                _record, _version, blocks = m.table_state(seq_id)
                held += sum(1 for b in blocks if b is not NULL_BLOCK)
                full += m.blocks_needed(m.num_tokens(seq_id))
            out.append(GroupHeld(group, held, full, self.block_size * m.bytes_per_slot,
                                 m.pool.n_used))
        return tuple(out)

    # ---- capacity ----------------------------------------------------------------------------

    def blocks_needed(self, n_tokens: int) -> int:
        return self.managers[0].blocks_needed(n_tokens)

    def can_allocate(self, tokens: int | Sequence[int], n_new_tokens: int | None = None
                     ) -> bool:
        """Whether every group has the blocks of the prompt now (`BlockManager.can_allocate`,
        with the hit they share)."""
        if isinstance(tokens, int):
            return all(m.can_allocate(tokens, n_new_tokens) for m in self.managers)
        hit = self.cached_prefix_len(tokens) if len(tokens) else 0
        return all(m.can_allocate(tokens, n_new_tokens, hit) for m in self.managers)

    def can_append(self, seq_id: object, n_tokens: int = 1) -> bool:
        """Whether every group has the blocks now (a drop the append would make first is not
        counted: one block per sliding group short at most)."""
        return all(m.can_append(seq_id, n_tokens) for m in self.managers)

    # ---- allocation --------------------------------------------------------------------------

    def allocate(self, seq_id: object, token_ids: Sequence[int],
                 n_new_tokens: int | None = None) -> int:
        """`BlockManager.allocate` in every group with the hit they share (all or nothing);
        the hit's blocks behind a window dropped at once."""
        hit = self.cached_prefix_len(token_ids) if len(token_ids) else 0
        done = []
        try:
            for m in self.managers:
                n_cached = m.allocate(seq_id, token_ids, n_new_tokens, hit)
                done.append(m)
        except Exception:  # one group ran short: none keeps the sequence
            for m in done:
                m.free(seq_id)
            raise
        self._computed[seq_id] = self._start[seq_id] = n_cached
        self._drop(seq_id)
        return n_cached

    def try_allocate(self, seq_id: object, token_ids: Sequence[int],
                     n_new_tokens: int | None = None) -> int | None:
        """`allocate` if `can_allocate` says the prompt fits now, else None (nothing
        changed), as `BlockManager.try_allocate`."""
        if not self.can_allocate(token_ids, n_new_tokens):
            return None
        return self.allocate(seq_id, token_ids, n_new_tokens)

    def append_each(self, seq_ids: Sequence[object], token_ids: Sequence[int],
                    partial: bool = True, tables: GroupTables | None = None
                    ) -> tuple[int, list[tuple[object, int, int]]]:
        """`BlockManager.append_each` in every group. A group that runs short at sequence i
        undoes the earlier groups' appends from i on, so every group holds the same tokens;
        their copy-on-write pairs are kept (the copy holds the sequence's earlier tokens)."""
        self._reserving(seq_ids)
        n = len(seq_ids)
        cows: list[tuple[object, int, int]] = []
        for g, m in enumerate(self.managers):
            own = None
            if tables is not None:  # cut to the sequences still going, as seq_ids[:n]
                own = tables[g] if n == len(seq_ids) else \
                    SeqTables(tables[g].records[:n], tables[g].version)
            got, made = m.append_each(seq_ids[:n], token_ids[:n], True, own)
            cows.extend((sid, self._id(g, s), self._id(g, d)) for sid, s, d in made)
            if got < n:
                for earlier in self.managers[:g]:
                    for sid in seq_ids[got:n]:
                        earlier.truncate(sid, earlier.num_tokens(sid) - 1)
                n = got
        if n < len(seq_ids) and not partial:
            raise KVOutOfMemoryError(f"sequence {seq_ids[n]!r} needs a free KV block in "
                                     "every layer group; one has none")
        return n, cows

    def tables(self, seq_ids: Sequence[object]) -> GroupTables:
        return GroupTables(m.tables(seq_ids) for m in self.managers)

    def append_tokens(self, seq_id: object, token_ids: Sequence[int]) -> list[tuple[int, int]]:
        """`BlockManager.append_tokens` in every group, all or nothing."""
        self._reserving((seq_id,))
        n_old = self.num_tokens(seq_id)
        cows: list[tuple[int, int]] = []
        for g, m in enumerate(self.managers):
            try:
                made = m.append_tokens(seq_id, token_ids)
            except Exception:
                for earlier in self.managers[:g]:
                    earlier.truncate(seq_id, n_old)
                raise
            cows.extend((self._id(g, s), self._id(g, d)) for s, d in made)
        return cows

    def fork(self, parent_id: object, child_id: object) -> None:
        for m in self.managers:
            m.fork(parent_id, child_id)
        self._computed[child_id] = self._computed[parent_id]
        self._start[child_id] = self._start[parent_id]

    def free(self, seq_id: object) -> None:
        for m in self.managers:
            m.free(seq_id)
        self._computed.pop(seq_id, None)
        self._start.pop(seq_id, None)

    def truncate(self, seq_id: object, n_tokens: int) -> list[int]:
        """`BlockManager.truncate` in every group (the released ids group-qualified, group by
        group); a ValueError, nothing changed, where a query at `n_tokens` would read a block
        a window dropped."""
        bs = self.block_size
        for g, m, window in self._sliding:
            _record, _version, blocks = m.table_state(seq_id)
            first = max(0, int(n_tokens) - window + 1) // bs
            if first < len(blocks) and blocks[first] is NULL_BLOCK:
                raise ValueError(
                    f"sequence {seq_id!r} cannot go back to {n_tokens} tokens: the "
                    f"{self.groups[g].name} group already dropped the blocks its keys lie in")
        released = [self._id(g, b) for g, m in enumerate(self.managers)
                    for b in m.truncate(seq_id, n_tokens)]
        self._computed[seq_id] = min(self._computed[seq_id], n_tokens)
        self._start[seq_id] = min(self._start[seq_id], n_tokens)
        return released

    def replace_tokens(self, seq_id: object, start: int, token_ids: Sequence[int]) -> None:
        for m in self.managers:
            m.replace_tokens(seq_id, start, token_ids)

    def mark_computed(self, seq_id: object, n_tokens: int) -> None:
        for m in self.managers:
            m.mark_computed(seq_id, n_tokens)
        self._computed[seq_id] = max(self._computed[seq_id], n_tokens)
        self._drop(seq_id)

    def mark_computed_each(self, seq_ids: Sequence[object], n_tokens: Sequence[int]) -> None:
        for m in self.managers:
            m.mark_computed_each(seq_ids, n_tokens)
        computed = self._computed
        for seq_id, n in zip(seq_ids, n_tokens, strict=True):
            computed[seq_id] = max(computed[seq_id], n)
            self._drop(seq_id)

    def mark_all_computed(self, seq_ids: Iterable[object]) -> None:
        seq_ids = list(seq_ids)
        for m in self.managers:
            m.mark_all_computed(seq_ids)
        num_tokens = self.managers[0].num_tokens
        for seq_id in seq_ids:
            self._computed[seq_id] = num_tokens(seq_id)
            self._drop(seq_id)

    # ---- the window --------------------------------------------------------------------------

    def _reserving(self, seq_ids: Iterable[object]) -> None:
        """A reservation starts where each sequence's reserved tokens end: drop what the
        window left behind first (its blocks go back to the pool before any is taken)."""
        num_tokens = self.managers[0].num_tokens
        for seq_id in seq_ids:
            self._start[seq_id] = num_tokens(seq_id)
            self._drop(seq_id)

    def _drop(self, seq_id: object) -> None:
        """Drop, in each sliding group, the blocks wholly before floor - W + 1."""
        floor = min(self._computed[seq_id], self._start[seq_id])
        bs = self.block_size
        for _g, m, window in self._sliding:
            n = (floor - window + 1) // bs
            if n > 0:
                m.drop_leading(seq_id, n)

    def _id(self, group: int, block_id: int) -> int:
        return group_block_id(group, block_id, self.n_blocks)

    # ---- model-facing tensors and the views (the first group's) ------------------------------

    def slot_mapping(self, seq_id: object, positions) -> torch.Tensor:
        return self.managers[0].slot_mapping(seq_id, positions)

    def block_table_tensor(self, seq_ids: Sequence[object],
                           device: torch.device | str | None = None, pad: int = 0
                           ) -> torch.Tensor:
        return self.managers[0].block_table_tensor(seq_ids, device, pad)

    def context_lens_tensor(self, seq_ids: Sequence[object],
                            device: torch.device | str | None = None) -> torch.Tensor:
        return self.managers[0].context_lens_tensor(seq_ids, device)

    def table_state(self, seq_id: object) -> tuple[object, int, list]:
        return self.managers[0].table_state(seq_id)

    def stats(self, step: int = 0) -> KVStats:
        return self.managers[0].stats(step)

    def pool_state(self) -> KVPoolState:
        return self.managers[0].pool_state()
