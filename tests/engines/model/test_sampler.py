"""The sampler: bad logits and temperatures are refused before any draw; its filtering is the
stable sort's, value for value; its draws follow the filtered distribution; a batch of
requests draws what each would draw alone."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.model.generate import generate
from inferlab.engines.model.sampler import (
    TOP_P_CANDIDATES,
    Sampler,
    SamplingParams,
    draw,
    filtered_probs,
    sample_batch,
)


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


def _sorted_filter(logits, temperature, top_k, top_p):
    """The filter written with a full stable sort (the definition in the module docstring),
    the reference the partial selection must equal."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if 0 < top_k < probs.shape[-1]:
        drop = probs.sort(dim=-1, descending=True, stable=True).indices[..., top_k:]
        probs = probs.scatter(-1, drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if top_p < 1:
        sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
        before = sorted_p.cumsum(dim=-1) - sorted_p
        sorted_p = sorted_p.masked_fill(before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**31), vocab=st.sampled_from([3, 17, 300, 1000]),
       levels=st.sampled_from([0, 3, 8]), temperature=st.sampled_from([0.3, 1.0, 2.5]),
       top_k=st.sampled_from([0, 1, 2, 40, 299]), top_p=st.sampled_from([1.0, 0.5, 0.9, 0.99]))
def test_filtering_equals_the_stable_sorts(seed, vocab, levels, temperature, top_k, top_p):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(6, vocab, generator=gen) * 3
    if levels:  # few distinct values: many ties, at the cut too
        logits = torch.randint(0, levels, (6, vocab), generator=gen).float()
    got = filtered_probs(logits, temperature, top_k, top_p)
    assert torch.equal(got, _sorted_filter(logits, temperature, top_k, top_p))


def test_top_p_past_the_first_candidates_widens_the_selection():
    # a flat row: top-p 0.9 keeps 90 % of 3,000 tokens, far past the first 256 selected
    logits = torch.zeros(2, 3000)
    logits[1, 7] = 1.0
    got = filtered_probs(logits, 1.0, 0, 0.9)
    assert TOP_P_CANDIDATES < int((got[0] > 0).sum()) < 3000
    assert torch.equal(got, _sorted_filter(logits, 1.0, 0, 0.9))


def test_draws_follow_the_filtered_distribution():
    # chi-square of 40,000 seeded draws over 6 tokens (top-k 5 zeroes one): a fixed seed, so
    # the statistic is one number; 30 is far past the 0.999 quantile of chi2(4), 18.5
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    probs = filtered_probs(logits, 1.0, top_k=5)[0]
    draws = Sampler(SamplingParams(1.0, seed=11, top_k=5))(logits.expand(40_000, 6))
    counts = torch.bincount(torch.tensor(draws), minlength=6).double()
    assert counts[5] == 0
    expected = probs[:5].double() * 40_000
    assert float(((counts[:5] - expected) ** 2 / expected).sum()) < 30


def test_a_zero_probability_token_is_never_drawn_even_at_the_edges():
    probs = torch.tensor([[0.0, 0.5, 0.5, 0.0], [0.0, 0.0, 1.0, 0.0]])
    for u in (0.0, 0.5, 1 - 2**-53):
        got = draw(probs, torch.tensor([u, u], dtype=torch.float64))
        assert got[0] in (1, 2) and got[1] == 2


def test_a_batch_draws_what_each_request_draws_alone():
    logits = torch.randn(7, 500, generator=torch.Generator().manual_seed(4)) * 2
    params = [SamplingParams(0.8, 0.9, seed=i, top_k=50 if i % 2 else 0) for i in range(5)]
    params += [SamplingParams(), SamplingParams(1.2, seed=3)]
    alone = [Sampler(p)(logits[i: i + 1])[0] for i, p in enumerate(params)]
    batch = [Sampler(p) for p in params]
    assert sample_batch(logits, batch) == alone
    # the next draws too: each sampler's stream moved on by one row, as alone
    again = [Sampler(p) for p in params]
    firsts = [s(logits[i: i + 1])[0] for i, s in enumerate(again)]
    assert firsts == alone
    assert sample_batch(logits, batch) == [s(logits[i: i + 1])[0] for i, s in enumerate(again)]
    with pytest.raises(ValueError, match="7 logits rows for 2 samplers"):
        sample_batch(logits, batch[:2])


def test_top_k_keeps_the_k_most_likely_tokens():
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
