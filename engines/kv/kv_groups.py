"""Layer groups: the layers whose K/V a paged cache keeps alike, and the one store they share.

A model with sliding-window layers keeps one block table per sequence per group, as vLLM's
hybrid KV cache manager does: the full-attention layers (window 0) hold every token, the
sliding layers of window W only the blocks some query can still read (`group_coordinator`).

    groups = layer_groups([lw.window for lw in model.layers])   # Gemma 3: full, then W = 512
    cache = GroupedKVCache(model.new_cache(n_blocks, bs), groups)

The store is the model's one `PagedKVCache` (every layer, `n_blocks` blocks). Each group
allocates those block ids from a pool of its own, and block b of group g is written and read
in g's layers only, so two groups holding the same id never share storage. Outside the
coordinator a group's block is named by one int, g * n_blocks + b (`group_block_id`): the
copy-on-write pairs a scheduler hands the cache, which `GroupedKVCache.copy_blocks` splits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from inferlab.engines.kv.cache import PagedKVCache


@dataclass(frozen=True)
class LayerGroup:
    """Layers that keep their K/V alike: full attention (`window` 0: every token), or a
    sliding window of `window` tokens (a query at p reads keys p - window + 1 .. p)."""

    window: int
    layers: tuple[int, ...]

    @property
    def name(self) -> str:
        return "full attention" if not self.window else f"sliding window {self.window}"


def layer_groups(windows: Sequence[int]) -> tuple[LayerGroup, ...]:
    """Layer i, of window `windows[i]` (0: full attention), grouped by window: the full layers
    first, then each window from the smallest (the order `roofline.memory.kv_layers` uses)."""
    by_window: dict[int, list[int]] = {}
    for layer, window in enumerate(windows):
        if window < 0:
            raise ValueError(f"layer {layer} has a negative window {window}")
        by_window.setdefault(int(window), []).append(layer)
    return tuple(LayerGroup(w, tuple(by_window[w])) for w in sorted(by_window))


def group_block_id(group: int, block_id: int, n_blocks: int) -> int:
    """Block `block_id` of group `group`, as one int: group * n_blocks + block_id."""
    return group * n_blocks + block_id


class GroupedKVCache:
    """The runner's cache for several layer groups: the model's `store` and the groups over it.

    Attention reads and writes the store directly (through each group's metadata); what goes
    through here are the copies a scheduler asks for by block id (`group_block_id`), each
    made in its group's layers only. Sizes are the store's.
    """

    def __init__(self, store: PagedKVCache, groups: Sequence[LayerGroup]) -> None:
        layers = sorted(i for g in groups for i in g.layers)
        if layers != list(range(store.n_layers)):
            raise ValueError(f"the groups' layers {layers} are not the store's "
                             f"{store.n_layers} layers, each once")
        self.store = store
        self.groups = tuple(groups)
        self.n_blocks = store.n_blocks
        self.block_size = store.block_size
        self.n_layers = store.n_layers
        self.dtype = store.dtype
        self.device = store.device

    @property
    def bytes_per_slot(self) -> int:
        return self.store.bytes_per_slot

    @property
    def bytes_per_block(self) -> int:
        return self.store.bytes_per_block

    @property
    def total_bytes(self) -> int:
        return self.store.total_bytes

    def copy_blocks(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Copy blocks src -> dst, each pair named by `group_block_id` (both in one group),
        in that group's layers."""
        by_group: dict[int, list[tuple[int, int]]] = {}
        n = self.n_blocks
        for src, dst in pairs:
            g, s = divmod(int(src), n)
            if g != int(dst) // n or not 0 <= g < len(self.groups):
                raise ValueError(f"copy {src} -> {dst}: not two blocks of one of the "
                                 f"{len(self.groups)} groups of {n} blocks")
            by_group.setdefault(g, []).append((s, int(dst) % n))
        for g, local in by_group.items():
            self.store.copy_blocks(local, layers=self.groups[g].layers)

    def copy_slots(self, src, dst) -> None:
        raise NotImplementedError("slots of a cache with several layer groups name no group: "
                                  "token trees run on one group only")
