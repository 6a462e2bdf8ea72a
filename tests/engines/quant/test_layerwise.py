"""The layer-at-a-time pass: the model's own numbers, and what each linear saw."""

from __future__ import annotations

import copy

import pytest
import torch

from inferlab.engines.model.llama import rms_norm
from inferlab.engines.model.tiny import tiny_model, tiny_moe_model
from inferlab.engines.quant import QuantError, quantize_groups
from inferlab.engines.quant.layerwise import LinearInputs, quantize_layerwise, run_layer
from inferlab.engines.quant.model_quant import quantize_model
from tests.torch_fixtures import TINY_GEMMA3

IDS = torch.tensor(list(b"Flour, water, salt and a little yeast go into a bowl."))


@pytest.fixture(scope="module")
def tiny():
    """(model, tokenizer): the seeded tiny model."""
    return tiny_model()


@pytest.fixture(scope="module")
def gemma3():
    """(model, tokenizer): the tiny model laid out as Gemma 3 (post-norms, GeGLU, windows,
    √d-scaled embeddings)."""
    return tiny_model(**TINY_GEMMA3)


@pytest.mark.parametrize("layout", ["tiny", "gemma3"])
def test_layers_run_alone_reproduce_the_model_exactly(layout, request):
    model, _ = request.getfixturevalue(layout)
    h = model.embed_rows(IDS).float()
    for lw in model.layers:
        h = run_layer(model, lw, h)
    assert torch.equal(model.head_logits(h), model.forward_nocache(IDS, all_logits=True))


def test_a_mixture_of_experts_model_is_refused_by_name():
    model, _ = tiny_moe_model()
    with pytest.raises(QuantError, match=r"tiny-moe's layers 0-1 are Mixture-of-Experts "
                                         r"blocks \(8 experts, top-2\)"):
        quantize_layerwise(model, [IDS.tolist()], lambda n, w, i: quantize_groups(w, 4, 32),
                           "rtn")
    with pytest.raises(QuantError, match="Mixture-of-Experts"):
        quantize_model(model, "int8")


def test_the_recorded_inputs(tiny):
    model, _ = tiny
    lw = model.layers[0]
    stats = {w: LinearInputs.empty(getattr(lw, w).in_features) for w in ("qkv", "o", "gate_up",
                                                                         "down")}
    run_layer(model, lw, model.embed[IDS].float(), stats, keep_rows=True)
    x = rms_norm(model.embed[IDS].float(), (64,), lw.attn_norm, model.config.norm_eps)
    # the model's own RMSNorm (the native path's fused one sums in another order): fp32-close
    torch.testing.assert_close(stats["qkv"].stacked_rows(), x)
    torch.testing.assert_close(stats["qkv"].gram, x.t() @ x)
    torch.testing.assert_close(stats["qkv"].hessian(), 2 * x.t() @ x / len(IDS))
    torch.testing.assert_close(stats["qkv"].abs_mean(), x.abs().mean(0))
    assert stats["down"].n_rows == len(IDS) and stats["down"].gram.shape == (128, 128)


def test_rtn_through_the_layerwise_pass_is_plain_rtn(tiny):
    model, _ = tiny

    def rtn(name, weight, inputs):
        return quantize_groups(weight, 4, 32)

    got = quantize_layerwise(model, [IDS.tolist()], rtn, "rtn")
    ref = quantize_model(model, lambda w: quantize_groups(w, 4, 32))
    assert [r.error for r in got.linears] == [r.error for r in ref.linears]
    assert got.weight_bytes == ref.weight_bytes


def test_progress_is_reported_per_layer(tiny):
    model, _ = tiny
    seen = []
    quantize_layerwise(model, [IDS.tolist()], lambda n, w, i: quantize_groups(w, 4, 32), "rtn",
                       progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]


@pytest.mark.parametrize("chunks,message", [
    ([], "calibration is empty"),
    ([[], []], "calibration is empty"),
    ([[1, 999]], "calibration token ids must lie in"),
])
def test_bad_calibration(tiny, chunks, message):
    with pytest.raises(QuantError, match=message):
        quantize_layerwise(tiny[0], chunks, lambda n, w, i: quantize_groups(w, 4, 32), "rtn")


def test_non_finite_activations_are_named(tiny):
    model = copy.copy(tiny[0])
    model.embed = model.embed.clone()
    model.embed[7] = torch.inf
    with pytest.raises(QuantError, match="activations at layers.0.qkv hold non-finite"):
        quantize_layerwise(model, [[7, 8, 9]], lambda n, w, i: quantize_groups(w, 4, 32), "x")


@pytest.mark.parametrize("layout", ["tiny", "gemma3"])
def test_true_sequential_with_exact_linears_reproduces_the_layers(layout, request):
    # each linear "quantized" to itself: the staged layer is the model's own layer (Gemma 3's
    # norms after attention and the MLP, and its GeGLU, included)
    model, _ = request.getfixturevalue(layout)
    seqs = [model.embed_rows(IDS).float(), model.embed_rows(IDS[:9]).float()]
    seen = []

    def identity(which, inputs):
        seen.append((which, inputs.n_rows))
        return getattr(model.layers[0], which)

    from inferlab.engines.quant.layerwise import true_sequential_layer

    got = true_sequential_layer(model, model.layers[0], seqs, identity)
    for g, h in zip(got, seqs, strict=True):
        assert torch.allclose(g, run_layer(model, model.layers[0], h), atol=1e-5, rtol=1e-5)
    n = len(IDS) + 9
    assert seen == [("qkv", n), ("o", n), ("gate_up", n), ("down", n)]  # in order, every row


def test_true_sequential_calibrates_each_linear_after_the_quantized_ones(tiny):
    # o's inputs are the attention output of the QUANTIZED qkv: what run_layer records on a
    # layer whose qkv holds the quantized weight
    from dataclasses import replace

    from inferlab.engines.model.linear import Linear
    from inferlab.engines.quant.layerwise import true_sequential_layer

    model, _ = tiny
    lw = model.layers[0]
    h = model.embed[IDS].float()
    q_qkv = Linear(quantize_groups(lw.qkv.weight.float(), 4, 16).dequantize())
    grams = {}

    def quantize(which, inputs):
        grams[which] = inputs.gram.clone()
        return q_qkv if which == "qkv" else getattr(lw, which)

    true_sequential_layer(model, lw, [h], quantize)
    stats = {w: LinearInputs.empty(getattr(lw, w).in_features) for w in ("qkv", "o", "gate_up",
                                                                         "down")}
    run_layer(model, replace(lw, qkv=q_qkv), h, stats)
    for w in ("qkv", "o", "gate_up", "down"):
        assert torch.allclose(grams[w], stats[w].gram, rtol=1e-4, atol=1e-4), w
    plain = {w: LinearInputs.empty(getattr(lw, w).in_features) for w in stats}
    run_layer(model, lw, h, plain)
    assert not torch.allclose(grams["o"], plain["o"].gram, rtol=1e-4, atol=1e-4)


def test_calibration_tokens_are_counted(tiny):
    model, _ = tiny
    chunks = [list(IDS[:20]), list(IDS[20:])]
    from inferlab.engines.quant.gptq import gptq_model

    for ts in (True, False):
        qm = gptq_model(model, chunks, true_sequential=ts)
        assert qm.calibration_tokens == len(IDS)
    assert quantize_model(model, "int8").calibration_tokens == 0


@pytest.mark.parametrize("width", [64, 1024, 1300])
def test_the_blocked_gram_is_the_plain_one(width):
    from inferlab.engines.quant.layerwise import add_gram

    torch.manual_seed(0)
    x1, x2 = torch.randn(37, width), torch.randn(11, width)
    gram = torch.zeros(width, width)
    add_gram(gram, x1)
    add_gram(gram, x2)
    ref = x1.double().t() @ x1.double() + x2.double().t() @ x2.double()
    assert torch.allclose(gram.double(), ref, rtol=1e-4, atol=1e-3)
    assert torch.equal(gram, gram.t())
