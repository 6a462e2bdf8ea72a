"""Paged attention read in place (native) against SDPA on the same keys, gathered by hand."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kernels.paged_attention import MAX_NATIVE_QUERIES, PagedPlan, supports
from inferlab.engines.kv.attention_metadata import PagedAttention, build_attention_metadata
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.kv.cache import PagedKVCache, QuantizedPagedKVCache


def _step(seed, contexts, n_queries, n_kv_heads, group, d_head, block_size, n_layers=2):
    """A pool with random K/V, sequences of `contexts` tokens each running their last
    `n_queries[i]` tokens; returns (cache, metadata, q)."""
    gen = torch.Generator().manual_seed(seed)
    n_blocks = sum(-(-c // block_size) for c in contexts) + 3
    cache = PagedKVCache(n_layers, n_blocks, block_size, n_kv_heads, d_head)
    cache.kv.normal_(generator=gen)
    blocks = BlockManager(n_blocks, block_size, enable_prefix_caching=False)
    for i, c in enumerate(contexts):  # interleave allocations so tables are not in order
        blocks.allocate(i, [(7 * i + t) % 50 for t in range(c)])
    meta = build_attention_metadata(blocks, list(range(len(contexts))), n_queries)
    q = torch.randn(meta.n_tokens, n_kv_heads * group, d_head, generator=gen)
    return cache, meta, q


def _reference(cache, meta, q, layer, scale):
    """Per sequence: its keys gathered block by block, SDPA with the causal limit."""
    out = torch.empty_like(q)
    starts = meta.query_start_loc.tolist()
    bs, n_kv = cache.block_size, cache.n_kv_heads
    group = q.shape[1] // n_kv
    for i, n_ctx in enumerate(meta.context_lens_host):
        table = meta.block_tables[i, : -(-n_ctx // bs)].long()
        k = cache.k[layer][:, table].reshape(n_kv, -1, cache.d_head)[:, :n_ctx]
        v = cache.v[layer][:, table].reshape(n_kv, -1, cache.d_head)[:, :n_ctx]
        a, b = starts[i], starts[i + 1]
        pos = meta.positions[a:b]
        mask = torch.arange(n_ctx)[None, :] <= pos[:, None]
        qi = q[a:b].transpose(0, 1)  # [H, n_q, D]
        k = k.repeat_interleave(group, 0)
        v = v.repeat_interleave(group, 0)
        out[a:b] = F.scaled_dot_product_attention(qi, k, v, attn_mask=mask,
                                                  scale=scale).transpose(0, 1)
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16),
       contexts=st.lists(st.integers(1, 90), min_size=1, max_size=5),
       n_q=st.integers(1, 5), n_kv_heads=st.integers(1, 3), group=st.sampled_from([1, 3, 8]),
       d_head=st.sampled_from([4, 16, 20, 64]), block_size=st.sampled_from([1, 4, 16]))
def test_native_equals_sdpa_on_gathered_keys(seed, contexts, n_q, n_kv_heads, group, d_head,
                                             block_size):
    n_queries = [min(n_q, c) for c in contexts]
    cache, meta, q = _step(seed, contexts, n_queries, n_kv_heads, group, d_head, block_size)
    assert supports(cache.native_view(), meta.query_lens)
    attend = PagedAttention(meta, cache, "native")
    assert attend.native is not None
    for layer in range(cache.n_layers):
        got = attend(q, layer, 0.3)
        ref = _reference(cache, meta, q, layer, 0.3)
        assert float((got - ref).abs().max()) < 1e-5 * max(1.0, float(ref.abs().max()))


def test_native_equals_the_torch_path_at_smollm2_shapes():
    contexts = [1, 17, 300, 64, 4096]
    cache, meta, q = _step(3, contexts, [1] * 5, 3, 3, 64, 16, n_layers=1)
    fast = PagedAttention(meta, cache, "native")
    slow = PagedAttention(meta, cache, "torch")
    assert fast.native is not None and slow.native is None
    assert torch.allclose(fast(q, 0, 0.125), slow(q, 0, 0.125), atol=1e-5, rtol=1e-5)


def test_what_the_kernel_does_not_take_goes_to_torch():
    cache, meta, q = _step(0, [40, 40], [MAX_NATIVE_QUERIES + 1, 1], 1, 1, 16, 16)
    view = cache.native_view()
    assert not supports(view, meta.query_lens)  # a prefill longer than the limit
    assert PagedAttention(meta, cache, "native").native is None
    assert not supports(view, [])
    for kv_dtype in ("int8", "fp8-e4m3"):
        small = QuantizedPagedKVCache(1, 4, 16, 1, 16, kv_dtype=kv_dtype).native_view()
        assert supports(small, [1])  # INT8 or E4M3 codes: native
        wide = QuantizedPagedKVCache(1, 4, 128, 1, 128, kv_dtype=kv_dtype).native_view()
        assert not supports(wide, [1])  # past the stack block
    bf16 = PagedKVCache(1, 4, 16, 1, 16, dtype=torch.bfloat16)
    assert bf16.native_view() is None and not supports(None, [1])


def test_the_cache_hands_out_what_the_kernels_read():
    """The view is the cache's own store (no copy): fp32 values, or the codes and scales."""
    fp32 = PagedKVCache(2, 4, 16, 3, 8)
    view = fp32.native_view()
    assert view.kind == "f32" and view.kv is fp32.kv and view.scales is None
    assert (view.n_kv_heads, view.n_blocks, view.block_size, view.d_head) == (3, 4, 16, 8)
    k, v = view.slot_stores(1)
    assert k.data_ptr() == fp32.slot_stores(1)[0].data_ptr() and k.shape == (3, 64, 8)
    assert torch.equal(v, fp32.slot_stores(1)[1])
    for kv_dtype in ("int8", "fp8-e4m3"):
        cache = QuantizedPagedKVCache(2, 4, 16, 3, 8, kv_dtype=kv_dtype)
        view = cache.native_view()
        assert view.kind == kv_dtype and view.kv is cache.kv and view.scales is cache.scales
        (codes, scales) = cache.code_stores(1)
        assert view.slot_stores(1)[1].data_ptr() == codes[1].data_ptr()
        assert view.scale_stores(1)[0].data_ptr() == scales[0].data_ptr()
    with pytest.raises(ValueError, match="no scales"):
        fp32.native_view().scale_stores(0)


def test_a_plan_checks_what_it_is_given():
    cache, meta, q = _step(1, [5], [1], 1, 2, 16, 4)
    plan = PagedPlan(cache.native_view(), meta.block_tables, meta.query_start_loc,
                     meta.positions)
    try:
        plan(q[:0], 0)
    except ValueError as e:
        assert "0 queries for a plan of 1" in str(e)
    else:
        raise AssertionError("a wrong query count was accepted")
    try:
        PagedPlan(cache.native_view(), meta.block_tables, torch.tensor([0, 2]), meta.positions)
    except ValueError as e:
        assert "does not split" in str(e)
    else:
        raise AssertionError("a wrong query_start_loc was accepted")


def _int8_step(seed, contexts, n_queries, n_kv_heads, group, d_head, block_size,
               kv_dtype="int8"):
    """As `_step`, the K/V written through an INT8 (or FP8 E4M3) cache's own quantizer."""
    fp32, meta, q = _step(seed, contexts, n_queries, n_kv_heads, group, d_head, block_size)
    cache = QuantizedPagedKVCache(fp32.n_layers, fp32.n_blocks, block_size, n_kv_heads, d_head,
                                  kv_dtype=kv_dtype)
    slots = torch.arange(fp32.n_blocks * block_size)
    for layer in range(fp32.n_layers):
        k, v = (x.view(n_kv_heads, -1, d_head).transpose(0, 1)
                for x in fp32.slot_stores(layer))
        cache.write(layer, slots, k, v)
    return cache, meta, q


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16),
       contexts=st.lists(st.integers(1, 70), min_size=1, max_size=4),
       n_q=st.integers(1, 4), n_kv_heads=st.integers(1, 3), group=st.sampled_from([1, 3, 8]),
       d_head=st.sampled_from([4, 20, 64]), block_size=st.sampled_from([1, 4, 16]),
       kv_dtype=st.sampled_from(["int8", "fp8-e4m3"]))
def test_int8_codes_read_in_the_kernel_equal_the_torch_path(seed, contexts, n_q, n_kv_heads,
                                                            group, d_head, block_size, kv_dtype):
    """The torch path gathers and dequantizes (s · c) then runs SDPA; the kernel scales the
    codes block by block (INT8 widened, E4M3 decoded in registers): the same numbers within
    fp32 rounding."""
    n_queries = [min(n_q, c) for c in contexts]
    cache, meta, q = _int8_step(seed, contexts, n_queries, n_kv_heads, group, d_head,
                                block_size, kv_dtype)
    assert supports(cache.native_view(), meta.query_lens)
    fast = PagedAttention(meta, cache, "native")
    slow = PagedAttention(meta, cache, "torch")
    assert fast.native is not None and slow.native is None
    for layer in range(cache.n_layers):
        got, ref = fast(q, layer, 0.3), slow(q, layer, 0.3)
        assert float((got - ref).abs().max()) < 1e-5 * max(1.0, float(ref.abs().max()))


def test_every_e4m3_code_is_read_exactly():
    """One key, so the output is its value row: every finite E4M3 code (a row of 254, so the
    vector loop and its scalar tail both decode some) read at scale 1 equals torch's own
    decoding of that code, the subnormal codes included (-0 comes out as the sum 0 + 1 · -0)."""
    codes = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F], dtype=torch.uint8)
    d = codes.numel()
    cache = QuantizedPagedKVCache(1, 2, 1, 1, d, kv_dtype="fp8-e4m3")
    (k_codes, v_codes), _ = cache.code_stores(0)
    v_codes.view(torch.uint8)[0, 0] = codes
    k_codes.view(torch.uint8)[0, 0] = 0x38  # 1.0
    blocks = BlockManager(2, 1, enable_prefix_caching=False)
    blocks.allocate(0, [5])
    meta = build_attention_metadata(blocks, [0], [1])
    assert supports(cache.native_view(), meta.query_lens)
    attention = PagedAttention(meta, cache, "native")
    assert attention.native is not None
    got = attention(torch.randn(1, 1, d), 0, 0.5)[0, 0]
    want = codes.view(torch.float8_e4m3fn).float()
    assert torch.equal(got, want)
