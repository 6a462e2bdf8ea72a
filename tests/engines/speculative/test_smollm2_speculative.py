"""Greedy speculative decoding of SmolLM2-135M (the real GGUF, fp32) equals plain greedy
decoding token for token, for the n-gram (chains and token trees), the layer-skip and the INT8
self-draft drafters. Slow: loads the model."""

from __future__ import annotations

import pytest

from inferlab.engines.model.generate import generate
from inferlab.engines.speculative.decoder import SpeculativeDecoder
from inferlab.engines.speculative.model_drafter import (
    LayerSkipDrafter,
    ModelDrafter,
    quantized_self_draft,
)
from inferlab.engines.speculative.ngram import NgramDrafter

pytestmark = pytest.mark.slow

PROMPTS = [
    "Summarise in two sentences: The lighthouse keeper climbed the stairs every evening, "
    "lit the lamp, and wrote the weather in his log.",
    "Rewrite this Python function with a docstring:\ndef area(w, h):\n    return w * h\n",
    "List the days of the week, one per line.",
]
N_NEW = 40  # each a step of every drafter; the tiny-model tests take longer runs


@pytest.fixture(scope="module")
def prompts_and_refs(smollm2):
    model, tok = smollm2
    out = []
    for text in PROMPTS:
        ids = tok.encode_prompt(text)
        ref = generate(model, [ids], max_new_tokens=N_NEW).generations[0].token_ids
        out.append((ids, ref))
    return out


@pytest.mark.parametrize("drafter", ["ngram", "layerskip:8", "quant:int8"])
def test_greedy_speculative_equals_greedy_target_on_smollm2(smollm2, prompts_and_refs, drafter):
    model, tok = smollm2
    if drafter == "quant:int8":
        d = ModelDrafter(quantized_self_draft(model, 8), tokenizer=tok, name=drafter)
    else:
        d = NgramDrafter() if drafter == "ngram" else LayerSkipDrafter(model, 8, tokenizer=tok)
    # layer-skip drafts are rarely accepted (an untrained early exit): K=2 keeps the
    # wasted drafting small; the rollback path still runs
    decoder = SpeculativeDecoder(model, d, k=2 if drafter == "layerskip:8" else 4, tokenizer=tok)
    accepted = 0
    # layer-skip: one prompt (its drafts are rejected almost always: each step costs two
    # forwards for one token, the slowest case here; the tiny-model tests take more prompts)
    cases = prompts_and_refs[:1] if drafter == "layerskip:8" else prompts_and_refs
    for ids, ref in cases:
        run = decoder.generate(ids, N_NEW)
        assert len(run.token_ids) == N_NEW
        assert run.token_ids == ref
        accepted += run.stats.num_accepted_tokens
    assert accepted > 0  # drafts were kept, so the rollback path ran too


def test_the_int8_self_draft_is_accepted_far_more_than_layer_skip(smollm2, prompts_and_refs):
    """INT8 weights barely move SmolLM2's greedy tokens, so its drafts are nearly all kept."""
    model, tok = smollm2
    d = ModelDrafter(quantized_self_draft(model, 8), tokenizer=tok, name="quant:int8")
    ids, _ref = prompts_and_refs[0]
    run = SpeculativeDecoder(model, d, k=4, tokenizer=tok).generate(ids, 32)
    assert run.stats.num_accepted_tokens / run.stats.num_draft_tokens > 0.8


def test_greedy_tree_speculative_equals_greedy_target_on_smollm2(smollm2, prompts_and_refs):
    """Token trees of up to 3 n-gram candidates, verified in one forward each (~20 s)."""
    model, tok = smollm2
    decoder = SpeculativeDecoder(model, NgramDrafter(), k=4, tokenizer=tok, tree_width=3)
    branched = accepted = 0
    for ids, ref in prompts_and_refs:
        run = decoder.generate(ids, N_NEW)
        assert run.token_ids == ref
        branched += sum(len(s.tree_tokens) > len(s.drafted) for s in run.steps)
        accepted += run.stats.num_accepted_tokens
    assert branched > 0 and accepted > 0  # real trees, and the compaction path ran
