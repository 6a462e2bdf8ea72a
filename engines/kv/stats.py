"""`KVStats`: one allocator's memory picture after one step, the record the KV lab draws.

Both allocators fill the same record on the same request stream, so their curves share axes.
Counts are in slots (one token's K and V across all layers); `bytes_per_slot` turns them into
bytes. Block fields describe the paged pool and are 0 for the contiguous allocator.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class KVStats:
    allocator: str
    """"paged" or "contiguous"."""
    step: int
    n_seqs: int
    total_slots: int
    """Slots in the whole cache."""
    block_size: int
    blocks_total: int
    blocks_used: int
    """Blocks held by at least one sequence."""
    blocks_free: int
    """Free blocks holding nothing reusable."""
    blocks_cached_free: int
    """Free blocks still holding a cached prefix (reused by a hit, evicted LRU)."""
    slots_reserved: int
    """Slots some sequence holds: used blocks x block_size, or reserved contiguous regions."""
    slots_filled: int
    """Reserved slots holding a token's K/V; a shared block counts once."""
    tokens_logical: int
    """Sum of sequence lengths; a shared token counts once per sequence."""
    slots_external_waste: int
    """Free slots in extents too small for one more request (contiguous only)."""
    shared_blocks: int
    """Blocks held by two or more sequences."""
    shared_saved_slots: int
    """Slots sharing saved: sum over blocks of (ref_count - 1) x block_size."""
    prefix_hit_tokens: int
    prefix_query_tokens: int
    evictions: int = 0
    """Cached blocks evicted so far (paged only)."""
    bytes_per_slot: int = 0
    """K+V bytes of one token over all layers (0 when not known)."""

    @property
    def slots_free(self) -> int:
        return self.total_slots - self.slots_reserved

    @property
    def slots_internal_waste(self) -> int:
        """Reserved slots not holding a token (unused tail of blocks or regions)."""
        return self.slots_reserved - self.slots_filled

    @property
    def waste_frac(self) -> float:
        """slots_internal_waste / slots_reserved: the share of reserved KV holding nothing."""
        return self.slots_internal_waste / self.slots_reserved if self.slots_reserved else 0.0

    @property
    def used_frac(self) -> float:
        """slots_reserved / total_slots."""
        return self.slots_reserved / self.total_slots if self.total_slots else 0.0

    @property
    def prefix_hit_rate(self) -> float:
        """prefix_hit_tokens / prefix_query_tokens (0 before any lookup)."""
        q = self.prefix_query_tokens
        return self.prefix_hit_tokens / q if q else 0.0

    @property
    def reserved_bytes(self) -> int:
        return self.slots_reserved * self.bytes_per_slot

    @property
    def waste_bytes(self) -> int:
        return self.slots_internal_waste * self.bytes_per_slot

    @property
    def shared_saved_bytes(self) -> int:
        return self.shared_saved_slots * self.bytes_per_slot

    def to_dict(self) -> dict:
        """Fields plus the derived figures, JSON-ready."""
        out = asdict(self)
        for name in (
            "slots_free",
            "slots_internal_waste",
            "waste_frac",
            "used_frac",
            "prefix_hit_rate",
            "reserved_bytes",
            "waste_bytes",
            "shared_saved_bytes",
        ):
            out[name] = getattr(self, name)
        return out
