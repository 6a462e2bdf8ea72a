"""The filtered distribution both target and draft are sampled from: hand-worked top-k and
top-p, greedy as one-hot, and agreement with engines/model's Sampler draw for draw."""

from __future__ import annotations

import math

import pytest
import torch

from inferlab.engines.model.sampler import Sampler, SamplingParams, draw
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.sampling import GREEDY, SamplingSettings, filtered_probs

LOGITS = torch.tensor([0.5, 0.2, 0.2, 0.1]).log()  # probabilities .5 .2 .2 .1 at T = 1


@pytest.mark.parametrize("settings, expected", [
    (SamplingSettings(), [0.5, 0.2, 0.2, 0.1]),
    (SamplingSettings(top_k=2), [5 / 7, 2 / 7, 0, 0]),  # a tie: the lower token id stays
    (SamplingSettings(top_k=4), [0.5, 0.2, 0.2, 0.1]),
    (SamplingSettings(top_p=0.45), [1, 0, 0, 0]),  # token 0 alone reaches 0.45
    (SamplingSettings(top_p=0.6), [5 / 7, 2 / 7, 0, 0]),  # .5 < .6: one more
    (SamplingSettings(top_p=0.75), [5 / 9, 2 / 9, 2 / 9, 0]),
    (SamplingSettings(top_k=3, top_p=0.7), [5 / 7, 2 / 7, 0, 0]),  # top-p on the top-k rows
    (SamplingSettings(temperature=0.5), [25 / 34, 4 / 34, 4 / 34, 1 / 34]),  # p^2, normalised
    (GREEDY, [1, 0, 0, 0]),
])
def test_filtered_probabilities_by_hand(settings, expected):
    probs = filtered_probs(LOGITS[None], settings)[0]
    assert probs.tolist() == pytest.approx(expected, abs=1e-6)


def test_rows_are_filtered_independently_and_sum_to_one():
    logits = torch.randn(5, 3, 40, generator=torch.Generator().manual_seed(0))
    probs = filtered_probs(logits, SamplingSettings(0.8, top_k=10, top_p=0.9))
    assert probs.shape == (5, 3, 40)
    assert torch.allclose(probs.sum(-1), torch.ones(5, 3))
    assert bool(((probs > 0).sum(-1) <= 10).all())


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9), (1.5, 0.5)])
def test_the_model_samplers_draws_come_from_this_distribution(temperature, top_p):
    # engines/model's Sampler draws from this distribution: with its uniforms, drawing from
    # filtered_probs picks the same tokens
    logits = torch.randn(64, 50, generator=torch.Generator().manual_seed(1)) * 2
    sampler = Sampler(SamplingParams(temperature, top_p, seed=9))
    u = Sampler(SamplingParams(temperature, top_p, seed=9)).uniforms(64)
    ours = draw(filtered_probs(logits, SamplingSettings(temperature, 0, top_p)), u)
    assert sampler(logits) == ours


def test_a_tiny_temperature_is_the_argmax():
    probs = filtered_probs(torch.tensor([[50.0, -1.0, 49.0]]), SamplingSettings(1e-300))
    assert probs.tolist() == [[1.0, 0.0, 0.0]]


@pytest.mark.parametrize("kwargs, match", [
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": math.inf}, "temperature"),
    ({"temperature": "1"}, "temperature"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_p": math.nan}, "top_p"),
    ({"top_k": -1}, "top_k"),
    ({"top_k": 2.0}, "top_k"),
])
def test_bad_settings_are_refused_naming_the_parameter(kwargs, match):
    with pytest.raises(SpeculativeError, match=match):
        SamplingSettings(**kwargs)


def test_broken_logits_are_refused():
    with pytest.raises(SpeculativeError, match="NaN"):
        filtered_probs(torch.tensor([[0.0, math.nan]]), SamplingSettings())
    with pytest.raises(SpeculativeError, match="-inf for every token"):
        filtered_probs(torch.tensor([[-math.inf, -math.inf]]), SamplingSettings())
