"""The draft-verify loop on the tiny model (fp32): greedy output equals plain greedy decoding
token for token for every drafter; the KV caches hold exactly the accepted tokens after every
step; sampling is seeded; bad input is refused before anything runs."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.speculative.decoder import SpeculativeDecoder
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.model_drafter import (
    LayerSkipDrafter,
    ModelDrafter,
    layer_skip_model,
)
from inferlab.engines.speculative.ngram import NgramDrafter
from inferlab.engines.speculative.sampling import GREEDY, SamplingSettings
from inferlab.engines.speculative.verification import TokenFate

PROMPTS = [list(b"the cat sat on the mat. the cat sat on the"), list(b"abcabcabc"), [7]]
N_NEW = 40


@pytest.fixture(scope="module")
def other_tiny():
    """A different, smaller model with the tiny model's (byte) tokenizer."""
    return tiny_model(seed=1, n_layers=1)


def drafters(tiny, other_tiny, settings=GREEDY):
    model, tok = tiny
    return {
        "ngram": NgramDrafter(),
        "layerskip": LayerSkipDrafter(model, 1, settings=settings),
        "small": ModelDrafter(other_tiny[0], settings=settings, tokenizer=other_tiny[1]),
        "same": ModelDrafter(model, settings=settings, tokenizer=tok),  # the draft IS the target
    }


@pytest.fixture(scope="module")
def plain(tiny):
    return [generate(tiny[0], [p], max_new_tokens=N_NEW).generations[0].token_ids
            for p in PROMPTS]


@pytest.mark.parametrize("name", ["ngram", "layerskip", "small", "same"])
@pytest.mark.parametrize("k", [1, 4])
def test_greedy_speculative_output_is_plain_greedy_output(tiny, other_tiny, plain, name, k):
    drafter = drafters(tiny, other_tiny)[name]
    decoder = SpeculativeDecoder(tiny[0], drafter, k=k, tokenizer=tiny[1], block_size=4)
    for prompt, ref in zip(PROMPTS, plain, strict=True):
        run = decoder.generate(prompt, N_NEW)
        assert run.token_ids == ref
        assert run.finish_reason == "length"
        assert sum(len(s.token_ids) for s in run.steps) == N_NEW
        assert run.target_forwards == len(run.steps) <= N_NEW


def test_a_draft_equal_to_the_target_is_always_accepted(tiny, other_tiny):
    drafter = drafters(tiny, other_tiny)["same"]
    run = SpeculativeDecoder(tiny[0], drafter, k=4).generate(PROMPTS[0], 41)
    assert run.acceptance_rate == 1.0
    assert run.target_forwards == 9  # 8 steps of 5 tokens, then one token left: no draft
    assert [len(s.token_ids) for s in run.steps] == [5] * 8 + [1]
    assert all(s.fates == (TokenFate.ACCEPTED,) * 4 + (TokenFate.BONUS,) for s in run.steps[:8])
    assert run.tokens_per_target_forward == pytest.approx(41 / 9)
    assert run.mean_acceptance_length == 5.0


def test_a_different_draft_is_rejected_and_the_target_corrects_it(tiny, other_tiny, plain):
    run = SpeculativeDecoder(tiny[0], drafters(tiny, other_tiny)["layerskip"],
                             k=3).generate(PROMPTS[0], N_NEW)
    assert 0 < run.acceptance_rate < 1
    step = next(s for s in run.steps if s.rejected)
    n = step.n_accepted
    assert step.accepted == (True,) * n + (False,) * (3 - n)
    assert step.fates[-1] is TokenFate.RESAMPLED
    assert step.token_ids[:n] == step.drafted[:n] and step.token_ids[n] != step.drafted[n]
    assert all(0 < q <= 1 for q in step.q[:n]) and step.q[-1] is None
    assert all(0 < p <= 1 for p in step.p)
    assert step.target_tokens == 4 or step.index == 0


def kv_of(runner: ModelRunner, seq, n: int) -> torch.Tensor:
    """The cache's K/V of `seq`'s first n tokens, [layers, 2, heads, n, d_head]."""
    slots = runner.blocks.slot_mapping(seq, range(n))
    c = runner.cache
    flat = c.kv.view(c.n_layers, 2, c.n_kv_heads, c.n_blocks * c.block_size, c.d_head)
    return flat[:, :, :, slots]


def recomputed_kv(model, tokens: list[int]) -> torch.Tensor:
    fresh = ModelRunner(model, n_blocks=-(-len(tokens) // 4), block_size=4,
                        enable_prefix_caching=False)
    fresh.add(0, tokens)
    fresh.step([0])
    return kv_of(fresh, 0, len(tokens))


@pytest.mark.parametrize("name", ["ngram", "layerskip"])
def test_the_caches_hold_exactly_the_accepted_tokens_after_every_step(tiny, other_tiny, name):
    model = tiny[0]
    drafter = drafters(tiny, other_tiny)[name]
    decoder = SpeculativeDecoder(model, drafter, k=4, block_size=4)
    prompt = PROMPTS[0]
    decoder.start(prompt, 30)
    rejected_any = False
    while True:
        step = decoder.step()
        rejected_any |= bool(step.rejected)
        if decoder.done:
            break
        text = prompt + decoder.output
        runner = decoder.runner
        # reserved == computed == prompt + out[:-1]: the last token waits for the next step
        assert runner.token_ids("target") == text[:-1]
        assert runner.pending("target") == 0
        stats = runner.blocks.stats()
        assert stats.tokens_logical == stats.slots_filled == len(text) - 1
        assert stats.blocks_used == -(-(len(text) - 1) // 4)
        assert stats.blocks_free + stats.blocks_cached_free == stats.blocks_total - \
            stats.blocks_used
        torch.testing.assert_close(kv_of(runner, "target", len(text) - 1),
                                   recomputed_kv(model, text[:-1]), rtol=1e-4, atol=1e-4)
        if name == "layerskip":  # the draft's cache: a prefix of the text, then its drafts
            cached = drafter.cached_token_ids()
            shared = text[: len(cached)]
            n_ok = next((i for i, (a, b) in enumerate(zip(cached, shared, strict=False)) if a != b),
                        len(cached))
            assert cached[:n_ok] == text[:n_ok] and len(cached) - n_ok <= 3
            torch.testing.assert_close(
                kv_of(drafter.runner, "draft", len(cached)),
                recomputed_kv(drafter.model, cached), rtol=1e-4, atol=1e-4)
            assert drafter.runner.blocks.stats().tokens_logical == len(cached)
    assert rejected_any  # the rollback path ran
    assert len(decoder.output) == 30


def test_sampling_is_seeded_and_emits_at_least_one_token_per_forward(tiny, other_tiny):
    settings = SamplingSettings(temperature=0.8, top_k=20, top_p=0.9)

    def run(seed, drafter_seed=0):
        model = tiny[0]
        drafter = LayerSkipDrafter(model, 1, settings=settings, seed=drafter_seed)
        return SpeculativeDecoder(model, drafter, k=3, settings=settings,
                                  seed=seed).generate(PROMPTS[0], N_NEW)

    a, b, c = run(1), run(1), run(2)
    assert a.token_ids == b.token_ids
    assert a.token_ids != c.token_ids
    for r in (a, c):
        assert len(r.token_ids) == N_NEW
        assert r.tokens_per_target_forward >= 1
        assert all(len(s.token_ids) >= 1 for s in r.steps)
        assert all(0 < p <= 1 for s in r.steps for p in s.p)


def test_a_stop_token_ends_the_run_without_being_emitted(tiny, other_tiny, plain):
    ref = plain[0]
    stop = ref[10]
    first = ref.index(stop)
    run = SpeculativeDecoder(tiny[0], NgramDrafter(), k=4).generate(PROMPTS[0], N_NEW,
                                                                   stop_token_ids=[stop])
    assert run.token_ids == ref[:first]
    assert run.finish_reason == "stop" and run.steps[-1].finish_reason == "stop"


@pytest.mark.parametrize("make, match", [
    (lambda m, t: SpeculativeDecoder(m, NgramDrafter(), k=0), "k must be an integer >= 1"),
    (lambda m, t: SpeculativeDecoder(m, NgramDrafter(), k=2.0), "k must be an integer >= 1"),
    (lambda m, t: SpeculativeDecoder(m, NgramDrafter(), settings=SamplingSettings(top_p=1.5)),
     "top_p must be in"),
    (lambda m, t: SpeculativeDecoder(m, NgramDrafter(), settings=SamplingSettings(top_p=0)),
     "top_p must be in"),
    (lambda m, t: SpeculativeDecoder(m, ModelDrafter(tiny_model(vocab_size=300)[0])),
     "vocabulary has 300 tokens, the target's 256; a draft model must use the target's"),
    (lambda m, t: SpeculativeDecoder(
        m, ModelDrafter(m, tokenizer=SimpleNamespace(
            name="other", backend=SimpleNamespace(get_vocab=lambda with_added_tokens: {"a": 0}))),
        tokenizer=t), r"tokenizer \(other\) differs from the target's"),
    (lambda m, t: SpeculativeDecoder(m, LayerSkipDrafter(m, 1, settings=SamplingSettings(0.5))),
     "the draft must be sampled with the verifier's settings"),
    (lambda m, t: SpeculativeDecoder(m, object()), "has no propose"),
    (lambda m, t: LayerSkipDrafter(m, 2), r"n_layers must be an integer in \[1, 1\]"),
])
def test_bad_settings_or_drafters_are_refused(tiny, make, match):
    with pytest.raises(SpeculativeError, match=match):
        make(*tiny)


@pytest.mark.parametrize("prompt, n, match", [
    ([], 4, "prompt_ids must not be empty"),
    ([1, 256], 4, r"token id 256, outside the target's vocabulary \[0, 256\)"),
    ([1, 2.5], 4, "prompt_ids holds 2.5"),
    ([1], 0, "max_new_tokens must be an integer >= 1"),
    ([1] * 2000, 50, "past the target's context of 2048"),
])
def test_bad_prompts_are_refused_before_anything_runs(tiny, prompt, n, match):
    drafter = LayerSkipDrafter(tiny[0], 1)
    decoder = SpeculativeDecoder(tiny[0], drafter, k=4)
    with pytest.raises(SpeculativeError, match=match):
        decoder.start(prompt, n)
    assert decoder.runner is None and drafter.runner is None  # nothing allocated, nothing run
    with pytest.raises(SpeculativeError, match="call start"):
        decoder.step()


def test_the_layer_skip_draft_shares_the_targets_tensors(tiny):
    model = tiny[0]
    draft = layer_skip_model(model, 1)
    assert draft.config.n_layers == 1 and draft.layers[0] is model.layers[0]
    assert draft.embed is model.embed and draft.lm_head is model.lm_head
    assert draft.final_norm is model.final_norm
    ids = torch.tensor(PROMPTS[1])
    torch.testing.assert_close(draft.forward_nocache(ids, all_logits=True),
                               _first_layer_logits(model, ids), rtol=1e-5, atol=1e-5)


def _first_layer_logits(model, ids):
    """The target with its later layers removed for one call, then put back."""
    layers = model.layers
    model.layers = layers[:1]
    try:
        return model.forward_nocache(ids, all_logits=True)
    finally:
        model.layers = layers


def test_records_are_frozen(tiny):
    run = SpeculativeDecoder(tiny[0], NgramDrafter(), k=2).generate(PROMPTS[1], 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.steps[0].token_ids = ()
