"""Low-bit linear layers equal dequantize-then-matmul; INT8 weights decode like fp32."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.kernels import lowbit
from inferlab.engines.model.generate import generate
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.lowbit_linear import Int4Linear, Int8Linear, lowbit_model


@pytest.fixture(scope="module")
def tiny():
    from inferlab.engines.model.tiny import tiny_model

    return tiny_model()


SHAPES = [(960, 576), (576, 1536), (3072, 576), (37, 64), (5, 100), (128, 192)]


def _rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cls", [Int8Linear, Int4Linear])
def test_equals_dequantize_then_matmul(shape, cls):
    gen = torch.Generator().manual_seed(shape[0] * 7 + shape[1])
    w = torch.randn(shape, generator=gen)
    layer = cls.quantize(w)
    for rows in (1, 3):
        x = torch.randn(rows, shape[1], generator=gen)
        ref = x.double() @ layer.dequantize().double().t()
        assert _rel_err(layer(x).double(), ref) < 2e-6


@pytest.mark.parametrize("group_size", [32, 64, 96, 128])
def test_int4_group_sizes_on_the_kernel_and_torch_path(monkeypatch, group_size):
    """Groups of 32 (llama.cpp's Q4 blocks) and of 64k run on the kernel; 96 (neither) on
    the torch path; all equal dequantize-then-matmul."""
    from inferlab.engines.quant.gguf_blocks import quantize_q4_1
    from inferlab.engines.quant.group import quantize_groups

    gen = torch.Generator().manual_seed(group_size)
    w = torch.randn(130, 576, generator=gen)
    rec = quantize_q4_1(w) if group_size == 32 else quantize_groups(
        w, bits=4, group_size=group_size, symmetric=False, ragged=True)
    layer = Int4Linear.from_groups(rec)
    assert layer.interleaved == (group_size % 32 == 0)
    calls = []
    real = lowbit.native_for
    monkeypatch.setattr(lowbit, "native_for", lambda x, ok=True: calls.append(ok) or real(x, ok))
    x = torch.randn(3, 576, generator=gen)
    ref = x.double() @ rec.dequantize().double().t()
    assert _rel_err(layer(x).double(), ref) < 2e-6
    assert calls == [layer.interleaved]


def test_kernel_builds_here():
    assert lowbit.available(), lowbit.build_error()


def test_torch_fallback_matches_kernel(monkeypatch):
    w = torch.randn(300, 576)
    x = torch.randn(2, 576)
    layers = [Int8Linear.quantize(w), Int4Linear.quantize(w)]
    fast = [layer(x) for layer in layers]
    monkeypatch.setattr(lowbit, "native_for", lambda x, ok=True: None)
    for layer, y in zip(layers, fast, strict=True):
        assert _rel_err(layer(x), y) < 2e-6


def test_int4_codes_and_symmetric_round_trip():
    w = torch.randn(16, 576)
    from inferlab.engines.quant.group import quantize_groups

    for symmetric in (False, True):
        rec = quantize_groups(w, bits=4, group_size=128, symmetric=symmetric, ragged=True)
        layer = Int4Linear.from_groups(rec)
        assert torch.allclose(layer.dequantize(), rec.dequantize(), atol=1e-6)
    assert layer.nbytes < w.numel() * 4 / 7  # 4-bit codes plus fp32 scales and minima


def test_bad_bits(tiny):
    with pytest.raises(QuantError, match="bits"):
        lowbit_model(tiny[0], bits=3)


def test_int8_greedy_agrees_with_fp32_for_24_tokens(tiny):
    model, tok = tiny
    q = lowbit_model(model, bits=8)
    prompts = [list(b"Hello there"), list(b"The cache"), list(b"abc")]
    ref = generate(model, prompts, max_new_tokens=24).generations
    got = generate(q, prompts, max_new_tokens=24).generations
    for a, b in zip(ref, got, strict=True):
        assert a.token_ids == b.token_ids


def test_lowbit_model_is_smaller_and_independent(tiny):
    model, _ = tiny
    before = model.final_norm.clone()
    q8, q4 = lowbit_model(model, bits=8), lowbit_model(model, bits=4)
    assert q4.weight_bytes < q8.weight_bytes < model.weight_bytes / 2.5
    assert q8.n_params == model.n_params
    q8.final_norm.add_(1.0)
    q8.layers[0].attn_norm.add_(1.0)
    assert torch.equal(model.final_norm, before)
    assert model.layers[0].attn_norm is not q8.layers[0].attn_norm
    logits = q4.forward_nocache(torch.tensor(list(b"hello")))
    assert torch.isfinite(logits).all()
