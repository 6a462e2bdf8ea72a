"""EAGLE and Medusa drafters in the speculative decoder: greedy output equals plain greedy
token for token; the drafts are the ones the head gives on the target's own features
(computed here without a cache, apart from the decoder); sampling runs, seeded."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.speculative.decoder import SpeculativeDecoder
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.head_drafter import EagleDrafter, MedusaDrafter
from inferlab.engines.speculative.heads.chain import eagle_chain, medusa_chain
from inferlab.engines.speculative.heads.dims import unit_rms
from inferlab.engines.speculative.heads.eagle import HeadCache
from inferlab.engines.speculative.heads.target_head import FrozenHead, target_embed
from inferlab.engines.speculative.heads.train import TrainSettings, fit
from inferlab.engines.speculative.sampling import SamplingSettings
from tests.engines.speculative.heads.helpers import (
    HELD_PROMPTS,
    TRAIN_PROMPTS,
    decode_as_plain_greedy,
    tiny_sequences,
)
from tests.torch_fixtures import TINY_GEMMA3

N_NEW = 40


@pytest.fixture(scope="module")
def heads(tiny):
    model, tok = tiny
    seqs = tiny_sequences(model, tok)
    s = dict(epochs=6, window_tokens=32, batch_windows=2, lr=3e-3, draft_vocab_size=128,
             eval_k=3)
    return {"eagle": fit(model, seqs, seqs[:1], TrainSettings(kind="eagle", **s)),
            "medusa": fit(model, seqs, seqs[:1], TrainSettings(kind="medusa", n_medusa=4, **s))}


def _drafter(kind, model, head, tok, **kw):
    return (EagleDrafter if kind == "eagle" else MedusaDrafter)(model, head, tokenizer=tok, **kw)


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_equals_plain_greedy(tiny, heads, kind, k):
    model, tok = tiny
    decoder = SpeculativeDecoder(model, _drafter(kind, model, heads[kind], tok), k=k,
                                 tokenizer=tok)
    accepted = 0
    for text in (*TRAIN_PROMPTS[:2], *HELD_PROMPTS):
        ids = tok.encode(text)
        ref = generate(model, [ids], max_new_tokens=N_NEW).generations[0].token_ids
        run = decoder.generate(ids, N_NEW)
        assert run.token_ids == tuple(ref), text
        assert run.steps[0].drafted == ()  # nothing run yet: the prompt's prefill step
        accepted += sum(sum(s.accepted) for s in run.steps)
    assert accepted > 0  # the head's drafts do get accepted: the features line up


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
def test_drafts_are_the_heads_on_the_targets_own_features(tiny, heads, kind):
    """Each step's drafts equal a chain drafted offline from features recomputed without a
    cache (`layers_nocache`) over the text the step saw."""
    model, tok = tiny
    head = heads[kind]
    ids = tok.encode(TRAIN_PROMPTS[0])
    decoder = SpeculativeDecoder(model, _drafter(kind, model, head, tok), k=4, tokenizer=tok)
    run = decoder.generate(ids, N_NEW)
    scorer, embed = FrozenHead(model, head.vocab), target_embed(model)
    text = list(ids)
    checked = 0
    for step in run.steps:
        if step.drafted:
            with torch.no_grad():
                u = unit_rms(model.layers_nocache(model.embed_rows(torch.tensor(text))))
                if kind == "eagle":
                    cache = HeadCache(head.dims, len(text) + 8)
                    out = head.module(u[None, :-1], embed(torch.tensor(text[1:]))[None], 0,
                                      cache)[0, -1]
                    ref, _ = eagle_chain(head.module, scorer, embed, cache, out,
                                         len(step.drafted))
                else:
                    ref, _ = medusa_chain(head.module, scorer, u[-2], len(step.drafted))
            assert tuple(ref) == step.drafted, step.index
            checked += 1
        text += list(step.token_ids)
    assert checked >= 3


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
def test_sampling_runs_seeded(tiny, heads, kind):
    model, tok = tiny
    sampling = SamplingSettings(temperature=0.8)
    outs = []
    for _ in range(2):
        drafter = _drafter(kind, model, heads[kind], tok, settings=sampling, seed=3)
        decoder = SpeculativeDecoder(model, drafter, k=3, settings=sampling, seed=5,
                                     tokenizer=tok)
        run = decoder.generate(tok.encode(HELD_PROMPTS[0]), 30)
        assert len(run.token_ids) == 30
        for step in run.steps:  # q rows: distributions over the full vocabulary
            assert all(q is None or 0 < q <= 1 for q in step.q)
        outs.append(run.token_ids)
    assert outs[0] == outs[1]


def test_wrong_kind_and_bad_k_refused(tiny, heads):
    model, tok = tiny
    with pytest.raises(SpeculativeError, match="eagle drafter needs a trained eagle head"):
        EagleDrafter(model, heads["medusa"])
    with pytest.raises(SpeculativeError, match="k must be"):
        EagleDrafter(model, heads["eagle"]).propose([1, 2, 3], 0)


@pytest.fixture(scope="module")
def gemma3_layout():
    """The tiny model laid out as Gemma 3 (post-norms, GeGLU, q/k-norms, (1 + w) norms,
    √d-scaled tied embeddings, 8-token sliding layers) and heads trained for it."""
    model, tok = tiny_model(**TINY_GEMMA3)
    seqs = tiny_sequences(model, tok)
    s = dict(epochs=6, window_tokens=32, batch_windows=2, lr=3e-3, draft_vocab_size=128,
             eval_k=3)
    return model, tok, {kind: fit(model, seqs, seqs[:1], TrainSettings(kind=kind, **s))
                        for kind in ("eagle", "medusa")}


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
def test_a_gemma3_layout_target_drafts_exactly(gemma3_layout, kind):
    """Gemma 3's layer layout reaches the head as Llama's does: the features are the residual
    stream after the last layer, the scorer its folded final norm and tied head; contexts
    past the 8-token window run its windowed layers."""
    model, tok, heads = gemma3_layout
    decoder = SpeculativeDecoder(model, _drafter(kind, model, heads[kind], tok), k=3,
                                 tokenizer=tok)
    accepted, _ = decode_as_plain_greedy(
        model, decoder, [tok.encode(t) for t in (TRAIN_PROMPTS[0], HELD_PROMPTS[0])], N_NEW)
    assert accepted > 0
