"""The INT8 (per row and per group), FP8 and INT4 kernels against dequantize-then-matmul in
float64, on every instruction set this CPU runs: ragged last groups, every tile remainder, 1 to
40 input rows."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kernels import lowbit
from inferlab.engines.quant import lowbit_linear as lb
from inferlab.engines.quant.fp8 import quantize_fp8
from inferlab.engines.quant.gguf_blocks import quantize_q8_0
from inferlab.engines.quant.group import quantize_groups
from tests.engines.kernels.tolerance import dot_err


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_interleave_round_trips(lanes):
    gen = torch.Generator().manual_seed(lanes)
    for k in (64, 128, 576, 1536):
        u = torch.randint(0, 16, (3, k), generator=gen, dtype=torch.uint8)
        words = lowbit.interleave(u, lanes)
        assert words.shape == (3, k // 8) and words.dtype == torch.int32
        assert torch.equal(lowbit.deinterleave(words, k, lanes), u)


def test_layout_by_hand():
    """8 lanes: word t of a 64-weight chunk holds weight 8 j + t in bits 4j..4j+3."""
    u = torch.zeros(1, 64, dtype=torch.uint8)
    u[0, 8 * 3 + 5] = 0xA  # j = 3, lane 5
    words = lowbit.interleave(u, 8)
    assert words[0, 5].item() == 0xA << 12 and int(words.count_nonzero()) == 1
    u16 = torch.zeros(1, 192, dtype=torch.uint8)  # one chunk of 128, then 64 in 8 lanes
    u16[0, 16 * 2 + 9] = 7
    u16[0, 128 + 8 * 7 + 1] = 15
    w16 = lowbit.interleave(u16, 16)
    assert w16[0, 9].item() == 7 << 8
    assert (w16[0, 16 + 1].item() & 0xFFFFFFFF) == 15 << 28


@settings(max_examples=50, deadline=None)
@given(m=st.integers(1, 40), k64=st.integers(1, 12), n=st.integers(1, 41),
       group=st.sampled_from([32, 64, 128, 192, 256]), symmetric=st.booleans(),
       seed=st.integers(0, 2**16))
def test_int4_matches_dequantize_then_matmul(build, m, k64, n, group, symmetric, seed):
    k = 64 * k64
    gen = torch.Generator().manual_seed(seed)
    w, x = torch.randn(n, k, generator=gen), torch.randn(m, k, generator=gen)
    rec = quantize_groups(w, bits=4, group_size=group, symmetric=symmetric, ragged=True)
    layer = lb.Int4Linear.from_groups(rec)
    codes = lowbit.interleave(layer.codes_u8(), build.vlen)
    y = lowbit.int4_kernel(lowbit.functions(build), x, codes, layer.scales, layer.mins, group)
    assert y.shape == (m, n)
    assert dot_err(y, x, rec.dequantize()) < 5e-5


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 300), n=st.integers(1, 41),
       seed=st.integers(0, 2**16))
def test_int8_matches_dequantize_then_matmul(build, m, k, n, seed):
    gen = torch.Generator().manual_seed(seed)
    w, x = torch.randn(n, k, generator=gen), torch.randn(m, k, generator=gen)
    layer = lb.Int8Linear.quantize(w)
    y = lowbit.int8_kernel(lowbit.functions(build), x, layer.q, layer.scale)
    assert dot_err(y, x, layer.dequantize()) < 5e-5


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 300), n=st.integers(1, 41),
       seed=st.integers(0, 2**16))
def test_fp8_matches_torchs_decoding_then_matmul(build, m, k, n, seed):
    """E4M3 codes (every code but NaN, drawn uniformly: subnormals and -0 included) decoded in
    registers against torch's own float8_e4m3fn decoding."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen)
    codes = torch.randint(0, 256, (n, k), generator=gen, dtype=torch.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x7E  # NaN -> 448
    scales = torch.rand(n, generator=gen) + 0.5
    y = lowbit.fp8_kernel(lowbit.functions(build), x, codes, scales)
    w = codes.view(torch.float8_e4m3fn).float() * scales[:, None]
    assert dot_err(y, x, w) < 5e-5


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), groups=st.integers(1, 12), n=st.integers(1, 41),
       group=st.sampled_from([16, 32, 64]), seed=st.integers(0, 2**16))
def test_grouped_int8_matches_dequantize_then_matmul(build, m, groups, n, group, seed):
    """Q8_0-style codes (a scale per group along the input): every tile remainder of rows and
    of weight rows."""
    gen = torch.Generator().manual_seed(seed)
    k = group * groups
    w, x = torch.randn(n, k, generator=gen), torch.randn(m, k, generator=gen)
    rec = quantize_q8_0(w) if group == 32 else \
        quantize_groups(w, bits=8, group_size=group, symmetric=True)
    layer = lb.GroupInt8Linear(rec.q, rec.scales, group)
    y = lowbit.group_int8_kernel(lowbit.functions(build), x, layer.q, layer.scales, group)
    assert dot_err(y, x, rec.dequantize()) < 5e-5
    assert torch.equal(layer.dequantize(), rec.dequantize())


def test_a_batch_equals_its_rows_alone():
    """Row r of a 9-row call is the 1-row call of row r: tiles of rows change nothing."""
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(70, 576, generator=gen)
    x = torch.randn(9, 576, generator=gen)
    fp8, q8 = quantize_fp8(w, "e4m3"), quantize_q8_0(w)
    for layer in (lb.Int8Linear.quantize(w), lb.Int4Linear.quantize(w, 32),
                  lb.Fp8Linear(fp8.codes, fp8.scale), lb.GroupInt8Linear(q8.q, q8.scales, 32)):
        batch = layer(x)
        alone = torch.cat([layer(x[r:r + 1]) for r in range(9)])
        assert torch.allclose(batch, alone, rtol=1e-6, atol=1e-6)
