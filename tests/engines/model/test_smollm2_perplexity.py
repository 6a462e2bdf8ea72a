"""Perplexity's conventions on SmolLM2 against transformers' own loss on the same windows:
the sliding windows as Hugging Face's "perplexity of fixed-length models" scores them (labels
of already-scored tokens set to -100), and llama.cpp's chunks (the first half's labels -100).

Slow: loads the GGUF with both loaders."""

import pytest
import torch

from inferlab.engines.model.perplexity import LLAMA_CPP, passage_text, perplexity

pytestmark = pytest.mark.slow


def _hf_nll_sum(hf_model, ids: list[int], labels: list[int]) -> tuple[float, int]:
    """transformers' summed NLL over the labels that are not -100 (its loss is their mean)."""
    with torch.inference_mode():
        out = hf_model(torch.tensor([ids]), labels=torch.tensor([labels]))
    n = sum(1 for x in labels[1:] if x != -100)  # the model shifts labels by one
    return float(out.loss) * n, n


def test_sliding_windows_equal_transformers_loss(smollm2, hf_smollm2):
    model, tok = smollm2
    hf_model, _ = hf_smollm2
    ids = tok.encode(passage_text())[:300]
    window, stride = 128, 48
    total, count, prev_end = 0.0, 0, 0
    for begin in range(0, len(ids), stride):  # the Hugging Face docs' loop, as written there
        end = min(begin + window, len(ids))
        trg_len = end - prev_end
        chunk = ids[begin:end]
        labels = [-100] * (len(chunk) - trg_len) + chunk[len(chunk) - trg_len:]
        nll, n = _hf_nll_sum(hf_model, chunk, labels)
        total, count, prev_end = total + nll, count + n, end
        if end == len(ids):
            break
    got = perplexity(model, ids, window=window, stride=stride)
    assert got.n_tokens == count == len(ids) - 1
    assert got.mean_nll == pytest.approx(total / count, rel=1e-4)


def test_llama_cpp_chunks_equal_transformers_loss(smollm2, hf_smollm2):
    model, tok = smollm2
    hf_model, _ = hf_smollm2
    ids = tok.encode(passage_text())[:300]
    n_ctx = 128
    total, count = 0.0, 0
    for c in range(len(ids) // n_ctx):
        chunk = ids[c * n_ctx: (c + 1) * n_ctx]
        labels = [-100] * (n_ctx // 2 + 1) + chunk[n_ctx // 2 + 1:]
        nll, n = _hf_nll_sum(hf_model, chunk, labels)
        total, count = total + nll, count + n
    got = perplexity(model, ids, window=n_ctx, convention=LLAMA_CPP)
    assert got.n_tokens == count == 2 * (n_ctx - n_ctx // 2 - 1)
    assert got.mean_nll == pytest.approx(total / count, rel=1e-4)
