"""Perplexity: exp of the mean NLL, checked by hand; the paged path equals plain attention;
a quantized KV cache changes it only a little."""

from __future__ import annotations

import math

import pytest
import torch

from inferlab.engines.model.perplexity import perplexity
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.quant.kv_quant import kv_quantized

IDS = list(b"The paged cache holds K and V for every token of the sequence so far. " * 2)


@pytest.fixture(scope="module")
def model():
    return tiny_model()[0]


def test_perplexity_is_exp_of_the_mean_nll_by_hand(model):
    logits = model.forward_nocache(torch.tensor(IDS), all_logits=True)
    logp = torch.log_softmax(logits[:-1].double(), dim=-1)
    nll = -sum(float(logp[t, IDS[t + 1]]) for t in range(len(IDS) - 1)) / (len(IDS) - 1)
    got = perplexity(model, IDS)
    assert got.n_tokens == len(IDS) - 1
    assert got.perplexity == pytest.approx(math.exp(nll), rel=1e-5)


@pytest.mark.parametrize("window", [1024, 40])
def test_the_paged_path_equals_plain_attention(model, window):
    plain = perplexity(model, IDS, window=window)
    paged = perplexity(model, IDS, window=window, paged=True)
    assert paged.n_tokens == plain.n_tokens
    assert paged.mean_nll == pytest.approx(plain.mean_nll, rel=1e-5)


@pytest.mark.parametrize("kv_dtype,tol", [("int8", 0.002), ("fp8-e4m3", 0.02)])
def test_a_quantized_kv_cache_moves_the_nll_a_little(model, kv_dtype, tol):
    plain = perplexity(model, IDS).mean_nll
    quantized = perplexity(kv_quantized(model, kv_dtype), IDS, paged=True).mean_nll
    assert quantized != plain  # the codes really are what attention reads
    assert quantized == pytest.approx(plain, rel=tol)
