"""Shared by the GPTQ and AWQ tests: text the tiny model itself wrote, and its perplexity.

The tiny model's weights are random, so English means nothing to it. Text SAMPLED from it
(temperature 1) is the one text it models best: any weight error then raises its perplexity,
which makes "GPTQ loses less than RTN" a robust comparison.
"""

from __future__ import annotations

import math

from inferlab.engines.model.generate import generate
from inferlab.engines.model.perplexity import perplexity
from inferlab.engines.model.sampler import SamplingParams


def sampled_text(model, seed: int, n: int, length: int) -> list[list[int]]:
    prompts = [[(seed * 31 + i * 7) % 256] for i in range(n)]
    result = generate(model, prompts, length - 1, SamplingParams(temperature=1.0, seed=seed))
    return [list(g.prompt_token_ids) + list(g.token_ids) for g in result.generations]


def mean_perplexity(model, texts) -> float:
    return math.exp(sum(perplexity(model, t).mean_nll for t in texts) / len(texts))
