"""The fused small ops against the torch ops they replace, on every instruction set this CPU
runs: RMSNorm (with and without the residual add), RoPE, SwiGLU, the paged K/V write."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kernels import fused
from inferlab.engines.kv.cache import PagedKVCache
from inferlab.engines.model.rope import RopeTables, apply_rope


@pytest.fixture(scope="module")
def glue(build):
    return fused.glue(build)


def _close(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-5) -> bool:
    return bool((a - b).abs().max() <= rel * b.abs().max().clamp_min(1e-30))


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 9), d=st.integers(1, 200), residual=st.booleans(),
       seed=st.integers(0, 2**16))
def test_add_rms_norm_is_torchs(glue, t, d, residual, seed):
    gen = torch.Generator().manual_seed(seed)
    x, r = torch.randn(t, d, generator=gen), torch.randn(t, d, generator=gen)
    w = torch.randn(d, generator=gen)
    want_x = x + r if residual else x.clone()
    want = F.rms_norm(want_x, (d,), w, 1e-5)
    out = torch.empty(t, d)
    glue.add_rms_norm(x, r if residual else None, w, 1e-5, out)
    assert torch.equal(x, want_x)  # the residual stream updated in place, exactly
    assert _close(out, want)


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 7), heads=st.integers(1, 5), extra=st.integers(0, 40),
       half=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_rope_in_place_is_apply_rope(glue, t, heads, extra, half, seed):
    d = 2 * half
    gen = torch.Generator().manual_seed(seed)
    rows = torch.randn(t, heads * d + extra, generator=gen)
    tables = RopeTables(d, 4096, 10000.0)
    cos, sin = tables.at(torch.randint(0, 4096, (t,), generator=gen))
    want = rows.clone()
    want[:, :heads * d] = apply_rope(rows[:, :heads * d].view(t, heads, d), cos, sin).reshape(
        t, heads * d)
    glue.rope(rows, cos, sin, heads, d)
    assert _close(rows, want)
    assert torch.equal(rows[:, heads * d:], want[:, heads * d:])  # past the heads: untouched


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 9), f=st.integers(1, 300), scale=st.sampled_from([1.0, 30.0]),
       seed=st.integers(0, 2**16))
def test_silu_mul_is_swiglu(glue, t, f, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    gu = torch.randn(t, 2 * f, generator=gen) * scale  # large gates: exp far from 1
    want = F.silu(gu[:, :f]) * gu[:, f:]
    got = glue.silu_mul(gu)
    assert torch.allclose(got, want, rtol=2e-6, atol=1e-6 * float(want.abs().max()))


def test_write_kv_is_the_caches_own_write(glue):
    gen = torch.Generator().manual_seed(5)
    a, b = PagedKVCache(2, 6, 4, 3, 8), PagedKVCache(2, 6, 4, 3, 8)
    qkv = torch.randn(5, 4 * 8 + 2 * 3 * 8, generator=gen)  # 4 query heads, then K, then V
    k = qkv[:, 32:56].view(5, 3, 8)
    v = qkv[:, 56:].view(5, 3, 8)
    slots = torch.tensor([0, 7, 3, 23, 12])
    a.write(1, slots, k, v)
    glue.write_kv(k, v, glue.checked_slots(slots, 24), *b.slot_stores(1))
    assert torch.equal(a.kv, b.kv)


def test_bad_arguments_are_refused_not_read_out_of_bounds(glue):
    with pytest.raises(ValueError, match="slot outside"):
        glue.checked_slots(torch.tensor([0, 24]), 24)
    with pytest.raises(ValueError, match="slot outside"):
        glue.checked_slots(torch.tensor([-1]), 24)
    with pytest.raises(ValueError):
        glue.silu_mul(torch.randn(2, 5))  # odd width: no gate/up halves
    with pytest.raises(ValueError):
        glue.add_rms_norm(torch.randn(2, 4), None, torch.randn(3), 1e-5, torch.empty(2, 4))
    with pytest.raises(ValueError):
        glue.rope(torch.randn(1, 16), *RopeTables(16, 8, 1e4).at(torch.tensor([0])), 2, 16)
    with pytest.raises(ValueError):
        glue.add_rms_norm(torch.randn(2, 4, dtype=torch.float64), None, torch.randn(4), 1e-5,
                          torch.empty(2, 4))


def test_the_model_takes_the_fused_ops_on_the_native_path_only():
    from inferlab.engines.model.tiny import tiny_model

    assert tiny_model(kernels="native")[0].glue is not None
    assert tiny_model(kernels="torch")[0].glue is None


def test_write_kv_i8_is_the_int8_caches_own_quantizer(glue):
    from inferlab.engines.kv.cache import QuantizedPagedKVCache

    gen = torch.Generator().manual_seed(9)
    a, b = (QuantizedPagedKVCache(2, 6, 4, 3, 8) for _ in range(2))
    qkv = torch.randn(6, 4 * 8 + 2 * 3 * 8, generator=gen) * 5
    qkv[2, 32:40] = 0.0  # a head of zeros: scale 1, codes 0
    qkv[3, 32] = 127 * 0.5 / 127  # values on a rounding edge
    k, v = qkv[:, 32:56].view(6, 3, 8), qkv[:, 56:].view(6, 3, 8)
    slots = torch.tensor([0, 7, 3, 23, 12, 5])
    a.write(1, slots, k, v)
    glue.write_kv_i8(k, v, glue.checked_slots(slots, 24), *b.code_stores(1))
    assert torch.equal(a.kv, b.kv) and torch.equal(a.scales, b.scales)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), log_range=st.integers(-12, 4))
def test_write_kv_fp8_is_the_e4m3_caches_own_quantizer(glue, seed, log_range):
    """E4M3 codes bit for bit torch's conversion, over magnitudes that reach the subnormal
    codes (a head's values spread over 2^log_range .. 2^(log_range + 12) of its max)."""
    from inferlab.engines.kv.cache import QuantizedPagedKVCache

    gen = torch.Generator().manual_seed(seed)
    a, b = (QuantizedPagedKVCache(1, 4, 4, 2, 24, kv_dtype="fp8-e4m3") for _ in range(2))
    k, v = (torch.randn(8, 2, 24, generator=gen)
            * 2.0 ** (log_range + 12 * torch.rand(8, 2, 24, generator=gen)) for _ in range(2))
    k[0, 0] = 0.0  # a head of zeros: scale 1, codes 0
    k[1, 0, :4] = torch.tensor([-0.0, 1.0, -1.0, 2.0 ** -20])
    slots = torch.randperm(16, generator=gen)[:8]
    a.write(0, slots, k, v)
    glue.write_kv_fp8(k, v, glue.checked_slots(slots, 16), *b.code_stores(0))
    assert torch.equal(a.kv.view(torch.uint8), b.kv.view(torch.uint8))
    assert torch.equal(a.scales, b.scales)


def test_every_e4m3_tie_rounds_to_even_as_torch_does(glue):
    """Each value halfway between two neighbouring E4M3 codes (and just either side of it),
    written as one head whose max is 448 (scale 1): the same code as torch's conversion."""
    from inferlab.engines.kv.cache import QuantizedPagedKVCache

    grid = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    mid = (grid[:-1] + grid[1:]) / 2
    values = torch.cat([grid, mid, mid.nextafter(torch.tensor(0.0)),
                        mid.nextafter(torch.tensor(1e9))])
    values = torch.cat([values, -values])
    d = 8
    rows = -(-values.numel() // (d - 1))
    x = torch.zeros(rows * (d - 1))
    x[: values.numel()] = values
    x = torch.cat([x.view(rows, d - 1), torch.full((rows, 1), 448.0)], dim=1)  # max 448
    k = x.view(rows, 1, d)
    a, b = (QuantizedPagedKVCache(1, rows, 1, 1, d, kv_dtype="fp8-e4m3") for _ in range(2))
    slots = torch.arange(rows)
    a.write(0, slots, k, k)
    glue.write_kv_fp8(k, k, glue.checked_slots(slots, rows), *b.code_stores(0))
    assert torch.equal(a.scales, torch.ones_like(a.scales))
    assert torch.equal(a.kv.view(torch.uint8), b.kv.view(torch.uint8))

