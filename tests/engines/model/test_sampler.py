"""The sampler never hands NaN to torch.multinomial: bad logits and temperatures are refused."""

import math

import pytest
import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.model.sampler import Sampler, SamplingParams


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_nan_or_inf_logits_are_refused(bad, temperature):
    logits = torch.randn(3, 16)
    logits[2, 5] = bad
    with pytest.raises(ValueError, match="logits row 2 holds NaN or \\+inf"):
        Sampler(SamplingParams(temperature, seed=1))(logits)


@pytest.mark.parametrize("temperature", [math.nan, math.inf, -1.0, "0.5", True])
def test_bad_temperatures_are_refused(temperature):
    with pytest.raises(ValueError, match="temperature must be"):
        SamplingParams(temperature=temperature)


def test_bad_top_p_and_seed_are_refused():
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(1.0, top_p=math.nan)
    with pytest.raises(ValueError, match="seed must be an integer"):
        SamplingParams(1.0, seed=1.5)


def test_a_tiny_temperature_samples_the_argmax():
    logits = torch.tensor([[1.0, 3.0, 2.0], [50.0, -1.0, 49.0]])
    assert Sampler(SamplingParams(1e-300, seed=0))(logits) == [1, 0]


def test_minus_inf_masks_tokens_but_a_row_of_only_minus_inf_is_refused():
    masked = torch.tensor([[0.0, -math.inf, 1.0]])
    assert Sampler(SamplingParams(1.0, seed=0))(masked)[0] in (0, 2)
    with pytest.raises(ValueError, match="-inf for every token"):
        Sampler(SamplingParams(1.0))(torch.full((1, 3), -math.inf))


@pytest.mark.parametrize("prompt, message", [
    ([1, 256], "token id 256, outside the model's vocabulary \\[0, 256\\)"),
    ([1, -1], "token id -1"),
    ([1, 2.0], "not an integer token id"),
])
def test_generate_refuses_prompt_ids_outside_the_vocabulary(tiny, prompt, message):
    with pytest.raises(ValueError, match=message):
        generate(tiny[0], [prompt], max_new_tokens=2)


def test_generate_accepts_numpy_and_tensor_ids(tiny):
    import numpy as np

    a = generate(tiny[0], [np.array([1, 2, 3])], max_new_tokens=3).generations
    b = generate(tiny[0], [torch.tensor([1, 2, 3])], max_new_tokens=3).generations
    assert a == b and a[0].prompt_token_ids == (1, 2, 3)


def _inline_top_p_draws(logits, temperature, top_p, seed):
    """The Sampler's draws before filtered_probs existed (its inline filtering, kept here as
    the reference): softmax(x / T), the top-p mask, multinomial on the unnormalised rest."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        before = sorted_p.cumsum(dim=-1) - sorted_p
        sorted_p = sorted_p.masked_fill(before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
    gen = torch.Generator().manual_seed(seed)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1).tolist()


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9), (1.3, 0.5)])
def test_top_k_zero_draws_what_the_inline_filter_drew(temperature, top_p):
    logits = torch.randn(2000, 100, generator=torch.Generator().manual_seed(3)) * 3
    ours = Sampler(SamplingParams(temperature, top_p, seed=5))(logits)
    assert ours == _inline_top_p_draws(logits, temperature, top_p, 5)


def test_top_k_keeps_the_k_most_likely_tokens():
    from inferlab.engines.model.sampler import filtered_probs

    logits = torch.tensor([[0.5, 0.2, 0.2, 0.1]]).log()
    assert filtered_probs(logits, 1.0, top_k=2)[0].tolist() == pytest.approx([5 / 7, 2 / 7, 0, 0])
    assert filtered_probs(logits, 1.0, top_k=3, top_p=0.7)[0].tolist() == pytest.approx(
        [5 / 7, 2 / 7, 0, 0])  # top-p over the renormalised top-k
    assert filtered_probs(logits, 0.0)[0].tolist() == [1, 0, 0, 0]
    draws = Sampler(SamplingParams(1.0, seed=0, top_k=1))(logits.expand(50, 4))
    assert set(draws) == {0}


@pytest.mark.parametrize("top_k", [-1, 2.0, True])
def test_bad_top_k_is_refused(top_k):
    with pytest.raises(ValueError, match="top_k must be an integer >= 0"):
        SamplingParams(1.0, top_k=top_k)
