"""Paged attention against plain contiguous SDPA: random data, ragged lengths, GQA, shuffled blocks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from inferlab.engines.kv import (
    BlockManager,
    DecodeAttention,
    PagedAttention,
    PagedKVCache,
    build_attention_metadata,
    paged_attention,
    paged_attention_decode,
    paged_attention_prefill,
)

TOL = 1e-5


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor, scale=None):
    """Contiguous attention: q [n_q, H, D] at positions q_pos over k/v [n_k, Hkv, D], causal."""
    g = q.shape[1] // k.shape[1]
    kk = k.repeat_interleave(g, dim=1).transpose(0, 1)
    vv = v.repeat_interleave(g, dim=1).transpose(0, 1)
    mask = torch.arange(k.shape[0])[None, :] <= q_pos[:, None]
    out = F.scaled_dot_product_attention(q.transpose(0, 1), kk, vv, attn_mask=mask, scale=scale)
    return out.transpose(0, 1)


def scattered_cache(lens, n_kv_heads, d_head, block_size, seed, n_layers=2, spare=5):
    """A cache holding random K/V for sequences of `lens` in randomly permuted blocks.

    Every layer holds its own K/V: ks[layer][i], vs[layer][i] are sequence i's [n, Hkv, D].
    """
    gen = torch.Generator().manual_seed(seed)
    n_blocks_each = [-(-n // block_size) for n in lens]
    n_blocks = sum(n_blocks_each) + spare
    perm = torch.randperm(n_blocks, generator=gen)
    cache = PagedKVCache(n_layers, n_blocks, block_size, n_kv_heads, d_head)
    cache.kv.normal_(generator=gen)  # garbage everywhere, including unused slots
    tables, used = [], 0
    ks = [[] for _ in range(n_layers)]
    vs = [[] for _ in range(n_layers)]
    for n, nb in zip(lens, n_blocks_each, strict=True):
        table = perm[used : used + nb]
        used += nb
        pos = torch.arange(n)
        slots = table[pos // block_size] * block_size + pos % block_size
        for layer in range(n_layers):
            k = torch.randn(n, n_kv_heads, d_head, generator=gen)
            v = torch.randn(n, n_kv_heads, d_head, generator=gen)
            cache.write(layer, slots, k, v)
            ks[layer].append(k)
            vs[layer].append(v)
        tables.append(table)
    width = max(n_blocks_each)
    bt = torch.zeros(len(lens), width, dtype=torch.int32)
    for i, t in enumerate(tables):
        bt[i, : len(t)] = t
    return cache, bt, ks[1], vs[1], gen, ks, vs


@pytest.mark.parametrize(
    "n_heads, n_kv_heads, block_size, lens",
    [
        (8, 2, 4, [1, 5, 16, 33, 7]),  # GQA g=4
        (4, 4, 16, [17, 64, 3]),  # MHA
        (6, 1, 8, [40, 9]),  # MQA
        (9, 3, 4, [9]),  # SmolLM2's g=3, one sequence: no mask
        (8, 2, 4, [12, 12, 12]),  # equal lengths, whole blocks: no mask
        (8, 2, 4, [7, 7]),  # equal lengths ending mid-block: cut, no mask
    ],
)
def test_decode_matches_contiguous_sdpa(n_heads, n_kv_heads, block_size, lens):
    d_head = 16
    cache, bt, _, _, gen, ks, vs = scattered_cache(
        lens, n_kv_heads, d_head, block_size, seed=len(lens)
    )
    q = torch.randn(len(lens), n_heads, d_head, generator=gen)
    ctx = torch.tensor(lens, dtype=torch.int32)
    # one plan for the step, every layer; the same, gathering two sequences at a time; and
    # the one-call form
    plan = DecodeAttention(cache, bt, lens)
    per_seq = bt.shape[1] * block_size * n_kv_heads * d_head * 4 * 2
    grouped = DecodeAttention(cache, bt, ctx, max_gather_bytes=2 * per_seq)
    assert len(grouped.groups) == -(-len(lens) // 2)
    assert all((mask is None) == (len(set(lens)) == 1) for *_, mask in plan.groups)
    for layer in (0, 1):
        outs = [plan(q, layer, 0.3), grouped(q, layer, 0.3)]
        if layer == 1:
            outs.append(paged_attention_decode(q, cache, 1, bt, ctx, scale=0.3))
        for out in outs:
            assert out.shape == q.shape
            for i, n in enumerate(lens):
                ref = reference(q[i : i + 1], ks[layer][i], vs[layer][i], torch.tensor([n - 1]),
                                scale=0.3)
                assert (out[i] - ref[0]).abs().max().item() < TOL


def test_decode_of_no_sequence_and_bad_plans():
    cache = PagedKVCache(1, 4, 4, 2, 8)
    empty = DecodeAttention(cache, torch.zeros(0, 1, dtype=torch.int32), [])
    assert empty(torch.zeros(0, 4, 8), 0).shape == (0, 4, 8)
    with pytest.raises(ValueError, match="lengths"):
        DecodeAttention(cache, torch.zeros(2, 1, dtype=torch.int32), [1])
    with pytest.raises(ValueError, match="own key"):
        DecodeAttention(cache, torch.zeros(1, 1, dtype=torch.int32), [0])
    with pytest.raises(ValueError, match="plan of 1"):
        DecodeAttention(cache, torch.zeros(1, 1, dtype=torch.int32), [1])(torch.zeros(2, 4, 8), 0)


@pytest.mark.parametrize("n_heads, n_kv_heads", [(8, 2), (3, 3)])
def test_prefill_with_cached_prefix_matches_causal_sdpa(n_heads, n_kv_heads):
    d_head, block_size = 8, 4
    lens = [13, 6, 1, 20]
    n_new = [5, 6, 1, 9]  # 13 = 8 cached + 5 new; 6 all new; ...
    cache, bt, ks, vs, gen, _, _ = scattered_cache(lens, n_kv_heads, d_head, block_size, seed=7)
    q_full = [torch.randn(n, n_heads, d_head, generator=gen) for n in lens]
    q = torch.cat([qf[-m:] for qf, m in zip(q_full, n_new, strict=True)])
    qsl = torch.tensor([0, 5, 11, 12, 21], dtype=torch.int32)
    out = paged_attention_prefill(q, cache, 1, bt, qsl, torch.tensor(lens))
    positions = torch.cat([torch.arange(n - m, n) for n, m in zip(lens, n_new, strict=True)])
    out_pos = paged_attention_prefill(q, cache, 1, bt, qsl, lens, positions=positions)
    for i, (n, m) in enumerate(zip(lens, n_new, strict=True)):
        ref = reference(q_full[i], ks[i], vs[i], torch.arange(n))[-m:]
        a, b = int(qsl[i]), int(qsl[i + 1])
        assert (out[a:b] - ref).abs().max().item() < TOL
        assert (out_pos[a:b] - ref).abs().max().item() < TOL


def test_prefill_rejects_a_bad_split():
    cache = PagedKVCache(1, 4, 4, 1, 8)
    with pytest.raises(ValueError, match="does not split"):
        paged_attention_prefill(torch.zeros(3, 1, 8), cache, 0, torch.zeros(1, 1), [0, 2], [2])
    with pytest.raises(ValueError, match="multiple"):
        paged_attention_decode(torch.zeros(1, 3, 8), PagedKVCache(1, 4, 4, 2, 8), 0,
                               torch.zeros(1, 1), torch.ones(1))


def test_cache_write_copy_blocks_and_budget():
    cache = PagedKVCache(3, 6, 2, 2, 4)
    assert cache.k[0].shape == (2, 6, 2, 4)  # [n_kv_heads, n_blocks, block_size, d_head]
    assert cache.bytes_per_slot == 2 * 3 * 2 * 4 * 4
    assert cache.total_bytes == 6 * cache.bytes_per_block
    k = torch.arange(2 * 2 * 4, dtype=torch.float32).view(2, 2, 4)
    cache.write(2, torch.tensor([5, 2]), k, -k)
    # slot 5 = block 2, offset 1; slot 2 = block 1, offset 0
    assert torch.equal(cache.k[2][:, 2, 1], k[0]) and torch.equal(cache.k[2][:, 1, 0], k[1])
    assert torch.equal(cache.v[2][:, 2, 1], -k[0])
    assert cache.k[0].abs().sum() == 0  # other layers untouched
    cache.copy_blocks([(2, 4), (1, 0)])
    assert torch.equal(cache.k[2][:, 4], cache.k[2][:, 2])
    assert torch.equal(cache.v[2][:, 0], cache.v[2][:, 1])
    rows = cache.block_rows(torch.tensor([4, 0]))
    assert rows.tolist() == [4, 0, 10, 6, 16, 12, 22, 18]  # (kv * n_kv_heads + h) * 6 + block
    got_k, got_v = cache.gather(2, rows)
    assert got_k.shape == (2, 2, 2, 4)  # [n_kv_heads, n, block_size, d_head]
    assert torch.equal(got_k[:, 0], cache.k[2][:, 2]) and torch.equal(got_v[:, 1], cache.v[2][:, 1])
    budget = 10 * cache.bytes_per_block + 7
    big = PagedKVCache.from_budget(budget, 3, 2, 2, 4, dtype="fp32")
    assert big.n_blocks == 10
    assert PagedKVCache.from_budget(budget, 3, 2, 2, 4, dtype="bf16").n_blocks == 20
    with pytest.raises(ValueError):
        PagedKVCache.from_budget(10, 3, 2, 2, 4)


def test_end_to_end_with_the_block_manager_fork_and_copy_on_write():
    """Prefill two prompts sharing a prefix, fork one, decode both branches, mixed batch."""
    torch.manual_seed(0)
    n_heads, n_kv_heads, d_head, bs = 4, 2, 8, 4
    mgr = BlockManager(32, block_size=bs)
    cache = PagedKVCache(2, 32, bs, n_kv_heads, d_head)
    kv_of: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}  # prefix -> its token's K/V

    def kv(prefix: tuple, layer: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        # deterministic "model": a token's K/V depends on its whole prefix (layer 1: scaled)
        if prefix not in kv_of:
            g = torch.Generator().manual_seed(hash(prefix) & 0xFFFFFFF)
            kv_of[prefix] = (torch.randn(n_kv_heads, d_head, generator=g),
                             torch.randn(n_kv_heads, d_head, generator=g))
        k, v = kv_of[prefix]
        return (k, v) if layer == 0 else (2 * k, -v)

    def run(seq_ids, query_lens):
        meta = build_attention_metadata(mgr, seq_ids, query_lens)
        toks = [mgr.token_ids(s) for s in seq_ids]
        q = torch.randn(meta.n_tokens, n_heads, d_head)
        attend = PagedAttention(meta, cache)  # planned once, used by both layers
        for layer in (0, 1):
            ks, vs = [], []
            for t, n_q in zip(toks, query_lens, strict=True):
                for p in range(len(t) - n_q, len(t)):
                    k, v = kv(tuple(t[: p + 1]), layer)
                    ks.append(k)
                    vs.append(v)
            cache.write(layer, meta.slot_mapping, torch.stack(ks), torch.stack(vs))
            out = attend(q, layer)
            assert torch.equal(out, paged_attention(q, cache, layer, meta))
            row = 0
            for t, n_q in zip(toks, query_lens, strict=True):
                k_all = torch.stack([kv(tuple(t[: p + 1]), layer)[0] for p in range(len(t))])
                v_all = torch.stack([kv(tuple(t[: p + 1]), layer)[1] for p in range(len(t))])
                pos = torch.arange(len(t) - n_q, len(t))
                ref = reference(q[row : row + n_q], k_all, v_all, pos)
                assert (out[row : row + n_q] - ref).abs().max().item() < TOL
                row += n_q
        for s in seq_ids:  # written: their full blocks may now be prefix hits
            mgr.mark_computed(s, mgr.num_tokens(s))

    system = list(range(100, 110))  # 2.5 blocks
    mgr.allocate("a", system + [1, 2, 3])
    run(["a"], [13])
    assert mgr.allocate("b", system + [7, 8]) == 8  # two cached blocks
    run(["b"], [4])
    mgr.fork("a", "a2")
    for step in range(6):
        cows = [c for s, t in (("a", 50 + step), ("a2", 60 + step), ("b", 70 + step))
                if (c := mgr.append_token(s, t)) is not None]
        cache.copy_blocks(cows)
        if step == 0:
            assert cows == [(3, 5)]  # a's partial block 3 ([10..12]) was shared with a2
        run(["a", "a2", "b"], [1, 1, 1])
    mgr.allocate("c", system + [1, 2, 3, 9, 9])  # hits a's first three full blocks
    assert mgr.num_cached_tokens("c") == 12
    mgr.append_token("b", 99)
    run(["b", "c"], [1, 6])  # mixed batch: one decode, one prefill after a cached prefix


def test_metadata_query_starts_describe_a_chunk_of_a_prompt_reserved_whole():
    """`query_starts` runs a chunk from a start position: context ends at the chunk's end."""
    mgr = BlockManager(16, block_size=4)
    mgr.allocate("a", list(range(10)))  # 10 reserved
    mgr.allocate("b", list(range(50, 53)))  # 3 reserved
    meta = build_attention_metadata(mgr, ["a", "b"], [4, 1], query_starts=[3, 1])
    assert meta.query_lens == (4, 1)
    assert meta.context_lens_host == (7, 2)
    assert meta.positions.tolist() == [3, 4, 5, 6, 1]
    assert meta.slot_mapping.tolist() == (
        mgr.slot_mapping("a", torch.arange(3, 7)).tolist()
        + mgr.slot_mapping("b", torch.tensor([1])).tolist()
    )
    assert meta.query_start_loc.tolist() == [0, 4, 5]
    assert meta.context_lens.tolist() == [7, 2]
    assert torch.equal(meta.block_tables, mgr.block_table_tensor(["a", "b"]))
    # starts at (reserved - query_len) are the default: the last reserved tokens
    last = build_attention_metadata(mgr, ["a", "b"], [4, 1])
    same = build_attention_metadata(mgr, ["a", "b"], [4, 1], query_starts=[6, 2])
    assert last.query_lens == same.query_lens
    assert last.context_lens_host == same.context_lens_host
    for f in ("positions", "slot_mapping", "query_start_loc", "context_lens", "block_tables"):
        assert torch.equal(getattr(last, f), getattr(same, f))
    with pytest.raises(ValueError, match="one query start"):
        build_attention_metadata(mgr, ["a"], [4], query_starts=[0, 0])
    for bad_start in (-1, 7):  # before the sequence; past its reserved tokens
        with pytest.raises(ValueError, match="cannot run"):
            build_attention_metadata(mgr, ["a"], [4], query_starts=[bad_start])
