"""INT8 / FP8 E4M3 KV cache: attention within a stated tolerance of the fp32 cache, the same
blocks, a quarter (plus scales) of the bytes."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.kv.cache import (
    PagedKVCache,
    QuantizedPagedKVCache,
    kv_bytes_per_slot,
    quantized_kv_bytes_per_slot,
)
from inferlab.engines.kv.paged_attention import paged_attention_decode

TOL = {"int8": 0.02, "fp8-e4m3": 0.08}
"""Max |attention out - fp32 cache's| / max |out| on N(0, 1) K/V (measured over 5 seeds: INT8 0.010,
E4M3 0.044)."""


def _pair(kv_dtype, n_layers=2, n_blocks=12, bs=4, heads=2, d=16):
    return (PagedKVCache(n_layers, n_blocks, bs, heads, d),
            QuantizedPagedKVCache(n_layers, n_blocks, bs, heads, d, kv_dtype=kv_dtype))


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8-e4m3"])
def test_decode_attention_within_tolerance(kv_dtype):
    gen = torch.Generator().manual_seed(1)
    ref, quant = _pair(kv_dtype)
    tables = torch.tensor([[3, 7, 1], [0, 5, 11]])
    lens = [10, 7]
    for s, n in enumerate(lens):
        pos = torch.arange(n)
        slots = tables[s, pos // 4] * 4 + pos % 4
        k, v = torch.randn(n, 2, 16, generator=gen), torch.randn(n, 2, 16, generator=gen)
        for c in (ref, quant):
            c.write(1, slots, k, v)
    q = torch.randn(2, 4, 16, generator=gen)
    a = paged_attention_decode(q, ref, 1, tables, lens, scale=0.25)
    b = paged_attention_decode(q, quant, 1, tables, lens, scale=0.25)
    assert float((a - b).abs().max() / a.abs().max()) < TOL[kv_dtype]


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8-e4m3"])
def test_copy_on_write_and_bytes(kv_dtype):
    ref, quant = _pair(kv_dtype, d=64)
    k = torch.randn(4, 2, 64)
    quant.write(0, torch.arange(4), k, -k)
    quant.copy_blocks([(0, 9)])
    rows = quant.block_rows(torch.tensor([0, 9]))
    kk, vv = quant.gather(0, rows)
    assert torch.equal(kk[:, 0], kk[:, 1]) and torch.equal(vv[:, 0], -kk[:, 0])
    assert quant.bytes_per_slot == quantized_kv_bytes_per_slot(2, 2, 64, 1)
    assert quant.bytes_per_slot == kv_bytes_per_slot(2, 2, 64, 4) * (64 + 4) // 256
    assert quant.n_blocks == ref.n_blocks and quant.block_size == ref.block_size
    assert quant.dtype == torch.float32


def test_zero_vectors_and_bad_dtype():
    c = QuantizedPagedKVCache(1, 2, 4, 1, 8)
    c.write(0, torch.tensor([1]), torch.zeros(1, 1, 8), torch.zeros(1, 1, 8))
    k, v = c.gather(0, c.block_rows(torch.tensor([0])))
    assert torch.equal(k, torch.zeros_like(k)) and torch.isfinite(v).all()
    with pytest.raises(ValueError, match="kv_dtype"):
        QuantizedPagedKVCache(1, 2, kv_dtype="int4")


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8-e4m3"])
def test_tiny_model_logits_and_tokens(kv_dtype):
    from inferlab.engines.model.generate import generate
    from inferlab.engines.model.runner import ModelRunner
    from inferlab.engines.model.tiny import tiny_model
    from inferlab.engines.quant.kv_quant import kv_quantized

    model, _ = tiny_model()
    qmodel = kv_quantized(model, kv_dtype)
    prompt = list(b"The paged cache holds K and V")
    logits = []
    for m in (model, qmodel):
        runner = ModelRunner(m, n_blocks=8, block_size=4, enable_prefix_caching=False)
        runner.add(0, prompt)
        runner.step([0])
        runner.append(0, 101)
        logits.append(runner.step([0]))
    assert isinstance(runner.cache, QuantizedPagedKVCache)
    a, b = logits
    assert float((a - b).abs().max() / a.abs().max()) < TOL[kv_dtype]
    if kv_dtype == "int8":
        ref = generate(model, [prompt], max_new_tokens=20).generations[0].token_ids
        got = generate(qmodel, [prompt], max_new_tokens=20).generations[0].token_ids
        assert got == ref
