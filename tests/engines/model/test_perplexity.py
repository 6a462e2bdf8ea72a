"""Perplexity: exp of the mean NLL, checked by hand; the sliding-window and llama.cpp
conventions against their definitions worked by hand (and against transformers' loss on the
same windows: test_smollm2_perplexity.py); the paged path equals plain attention; a quantized
KV cache changes it only a little."""

from __future__ import annotations

import math

import pytest
import torch

from inferlab.engines.model.perplexity import LLAMA_CPP, SLIDING, perplexity, windows
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


# ---- how the text is cut: the conventions, worked by hand -----------------------------------

def test_sliding_windows_by_hand():
    # 10 tokens, windows of 4 every 2: each window scores what the previous one did not
    assert windows(10, 4, 2) == [(0, 1, 4), (2, 4, 6), (4, 6, 8), (6, 8, 10)]
    # stride window - 1 (the default): windows meet, each first token context only
    assert windows(10, 4, 3) == [(0, 1, 4), (3, 4, 7), (6, 7, 10)]
    assert windows(3, 8, 7) == [(0, 1, 3)]


def test_llama_cpp_chunks_by_hand():
    # llama-perplexity -c 4 on 10 tokens: floor(10 / 4) = 2 chunks, the tail of 2 dropped;
    # first = n_ctx / 2 = 2, logits from position 2 on score positions 3 .. n_ctx - 1
    assert windows(10, 4, 4, LLAMA_CPP) == [(0, 3, 4), (4, 7, 8)]
    # n_ctx = 6: first = 3, positions 4 and 5 of each chunk (n_ctx - first - 1 = 2)
    assert windows(13, 6, 6, LLAMA_CPP) == [(0, 4, 6), (6, 10, 12)]
    with pytest.raises(ValueError, match="at least 2 \\* n_ctx = 8 tokens"):
        windows(7, 4, 4, LLAMA_CPP)


def _nll_of(model, context: list[int], target: int) -> float:
    """-log p(target | context): one forward of exactly that context, its last position."""
    logits = model.forward_nocache(torch.tensor(context), all_logits=True)
    return -float(torch.log_softmax(logits[-1].double(), dim=-1)[target])


@pytest.mark.parametrize("window,stride", [(16, 5), (16, 15), (40, 1)])
def test_sliding_scores_each_token_once_with_its_windows_context(model, window, stride):
    # the reference: token t is scored once, from the start of the first window that holds
    # it and scores it (HF's loop: windows start every `stride`, score past the last end)
    n, expected, scored_to, start = len(IDS), [], 1, 0
    while True:
        end = min(start + window, n)
        for t in range(max(scored_to, start + 1), end):
            expected.append(_nll_of(model, IDS[start:t], IDS[t]))
        scored_to = end
        if end == n:
            break
        start += stride
    got = perplexity(model, IDS, window=window, stride=stride)
    assert got.n_tokens == len(expected) == n - 1
    assert got.mean_nll == pytest.approx(sum(expected) / len(expected), rel=1e-5)
    assert (got.window_tokens, got.stride_tokens, got.convention) == (window, stride, SLIDING)


def test_llama_cpp_scores_the_second_half_of_each_chunk(model):
    n_ctx, bos = 16, 7
    expected = []
    for c in range(len(IDS) // n_ctx):
        chunk = IDS[c * n_ctx: (c + 1) * n_ctx]
        chunk = [bos, *chunk[1:]]  # the chunk's first token replaced by BOS
        for j in range(n_ctx // 2 + 1, n_ctx):
            expected.append(_nll_of(model, chunk[:j], chunk[j]))
    got = perplexity(model, IDS, window=n_ctx, convention=LLAMA_CPP, bos_id=bos)
    assert got.n_tokens == len(expected) == (len(IDS) // n_ctx) * (n_ctx - n_ctx // 2 - 1)
    assert got.mean_nll == pytest.approx(sum(expected) / len(expected), rel=1e-5)
    assert (got.window_tokens, got.stride_tokens) == (n_ctx, n_ctx)
    assert perplexity(model, IDS, window=n_ctx, convention=LLAMA_CPP).mean_nll != got.mean_nll


def test_the_full_context_is_one_forward_of_a_short_text(model):
    full = perplexity(model, IDS, window=None)
    assert full.window_tokens == model.config.max_position >= len(IDS)
    assert full.mean_nll == pytest.approx(perplexity(model, IDS, window=len(IDS)).mean_nll,
                                          rel=1e-6)
    assert full.to_dict()["ppl_window_tokens"] == model.config.max_position


@pytest.mark.parametrize("kwargs,message", [
    ({"window": 8, "stride": 8}, "stride must be in 1..7"),
    ({"window": 8, "stride": 0}, "stride must be in 1..7"),
    ({"window": 1}, "window must be at least 2"),
    ({"window": 8, "stride": 4, "convention": LLAMA_CPP}, "chunks do not overlap"),
    ({"convention": "hf"}, "convention must be one of"),
])
def test_bad_windows_are_refused(model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        perplexity(model, IDS, **kwargs)
