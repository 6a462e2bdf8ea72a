"""Greedy decoding of SmolLM2 with INT8 weights against the fp32 model: the leading tokens they
agree on, over eight prompts. Measured on this machine (32 new tokens each):

    int8-sym (symmetric per channel)   [11, 32, 32, 32, 7, 12, 32, 32]   5 of 8 reach 20
    q8_0 (groups of 32, fp16 scales)   [32, 28, 32, 28, 31, 32, 21, 8]   7 of 8
    int8 (affine per channel)          [1, 17, 32, 28, 2, 12, 32, 8]     3 of 8

A divergence is a near-tie of the top two logits flipped by the weights' rounding; after it
the texts differ but both are fluent (the lab's Model tab shows the samples side by side)."""

from __future__ import annotations

import pytest

from inferlab.engines.model.generate import generate
from inferlab.engines.quant.model_quant import quantize_model
from inferlab.engines.sequences import common_prefix_len

PROMPTS = ("Why is the sky blue?", "Write a haiku about the sea.",
           "What is the capital of France?", "Explain how a pendulum clock keeps time.",
           "List three uses of copper.", "How do bees make honey?", "What does a compiler do?",
           "Describe a rainy morning in a city.")
N_NEW = 32


@pytest.fixture(scope="module")
def reference(smollm2):
    model, tok = smollm2
    ids = [tok.encode_prompt(p) for p in PROMPTS]
    return ids, [g.token_ids for g in generate(model, ids, max_new_tokens=N_NEW).generations]


@pytest.mark.slow
@pytest.mark.parametrize("scheme,at_least", [("int8-sym", 5)])
def test_int8_greedy_agrees_with_fp32_for_20_tokens_on_most_prompts(smollm2, reference, scheme,
                                                                    at_least):
    ids, ref = reference
    q = quantize_model(smollm2[0], scheme).model
    got = [g.token_ids for g in generate(q, ids, max_new_tokens=N_NEW).generations]
    agree = [common_prefix_len(a, b) for a, b in zip(got, ref, strict=True)]
    assert sum(n >= 20 for n in agree) >= at_least, agree
