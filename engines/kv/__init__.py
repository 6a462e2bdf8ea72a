"""Paged KV cache: the block allocator, its contiguous baseline, the cache tensors, attention.

    BlockManager        per-sequence block tables over a BlockPool (ref counts, copy-on-write,
                        prefix caching with lazy LRU eviction)
    KVCacheCoordinator  one BlockManager per layer group (full attention, each sliding
                        window), a window's blocks dropped behind it; LayerGroup, layer_groups,
                        GroupedKVCache (the one store, copies by group), GroupedMetadata
    ContiguousAllocator one max_seq_len region per request: the fragmentation baseline
    PagedKVCache        K/V tensors by block; write at a slot mapping; copy blocks
    PagedAttention      one step's attention through block tables, planned once, run per
                        layer (DecodeAttention batches the one-token sequences)
    paged_attention_*   decode / prefill / masked attention through block tables, one call
    MaskedAttention     one sequence's queries under an explicit mask (token trees)
    KVStats             one allocator's memory picture per step
    KVPoolState         every block of the paged pool as numpy arrays (the block grid)
"""

from inferlab.engines.kv.attention_metadata import (
    AttentionMetadata,
    GroupedMetadata,
    PagedAttention,
    build_attention_metadata,
    paged_attention,
)
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.kv.block_pool import DEFAULT_BLOCK_SIZE, BlockPool, blocks_for_budget
from inferlab.engines.kv.cache import PagedKVCache, kv_bytes_per_block, kv_bytes_per_slot
from inferlab.engines.kv.contiguous import ContiguousAllocator
from inferlab.engines.kv.errors import KVCapacityError, KVOutOfMemoryError
from inferlab.engines.kv.group_coordinator import KVCacheCoordinator
from inferlab.engines.kv.kv_groups import GroupedKVCache, LayerGroup, layer_groups
from inferlab.engines.kv.paged_attention import (
    DecodeAttention,
    MaskedAttention,
    paged_attention_decode,
    paged_attention_masked,
    paged_attention_prefill,
)
from inferlab.engines.kv.pool_state import KVPoolState
from inferlab.engines.kv.stats import KVStats

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "AttentionMetadata",
    "BlockManager",
    "BlockPool",
    "ContiguousAllocator",
    "DecodeAttention",
    "GroupedKVCache",
    "GroupedMetadata",
    "KVCacheCoordinator",
    "KVCapacityError",
    "KVOutOfMemoryError",
    "KVPoolState",
    "KVStats",
    "LayerGroup",
    "MaskedAttention",
    "PagedAttention",
    "PagedKVCache",
    "blocks_for_budget",
    "build_attention_metadata",
    "kv_bytes_per_block",
    "kv_bytes_per_slot",
    "layer_groups",
    "paged_attention",
    "paged_attention_decode",
    "paged_attention_masked",
    "paged_attention_prefill",
]
