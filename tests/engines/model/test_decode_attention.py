"""The decode fast path equals engines/kv's paged_attention_decode (the reference)."""

import pytest
import torch

from engines.kv.attention_metadata import AttentionMetadata
from engines.kv.cache import PagedKVCache
from engines.kv.paged_attention import paged_attention_decode
from engines.model.decode_attention import DecodeAttention


def decode_meta(tables, lens):
    width = max(len(t) for t in tables)
    bt = torch.zeros(len(tables), width, dtype=torch.int32)
    for i, t in enumerate(tables):
        bt[i, : len(t)] = torch.tensor(t, dtype=torch.int32)
    n = len(lens)
    return AttentionMetadata(
        seq_ids=tuple(range(n)), query_lens=(1,) * n, context_lens_host=tuple(lens),
        positions=torch.tensor([x - 1 for x in lens]),
        slot_mapping=torch.zeros(n, dtype=torch.int64),
        query_start_loc=torch.arange(n + 1, dtype=torch.int32),
        context_lens=torch.tensor(lens, dtype=torch.int32), block_tables=bt)


@pytest.mark.parametrize("n_heads, n_kv_heads", [(8, 8), (8, 2), (9, 3), (4, 1)])
@pytest.mark.parametrize("tables, lens", [
    ([[3, 0, 5]], [9]),                                   # one sequence: no mask
    ([[1, 4], [6, 2, 7], [0]], [8, 10, 1]),               # ragged
    ([[5, 1], [2, 3]], [7, 7]),                           # equal lengths
])
def test_matches_the_reference(n_heads, n_kv_heads, tables, lens):
    gen = torch.Generator().manual_seed(0)
    cache = PagedKVCache(2, 8, 4, n_kv_heads, 16)
    cache.kv.copy_(torch.randn(cache.kv.shape, generator=gen))
    meta = decode_meta(tables, lens)
    q = torch.randn(len(lens), n_heads, 16, generator=gen)
    fast = DecodeAttention(meta, 4, torch.device("cpu"))
    for layer in (0, 1):
        ref = paged_attention_decode(q, cache, layer, meta.block_tables, meta.context_lens,
                                     0.25, max(lens))
        assert (fast(q, cache, layer, 0.25) - ref).abs().max() < 1e-5
    assert (fast.mask is None) == (len(set(lens)) == 1)
