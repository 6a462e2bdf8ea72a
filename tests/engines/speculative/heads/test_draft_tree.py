"""EAGLE-2's dynamic draft tree (heads/draft_tree.py) and the EAGLE drafter's token trees."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.speculative.decoder import SpeculativeDecoder
from inferlab.engines.speculative.head_drafter import EagleDrafter
from inferlab.engines.speculative.heads.chain import eagle_chain
from inferlab.engines.speculative.heads.dims import unit_rms
from inferlab.engines.speculative.heads.draft_tree import _rerank, eagle_tree
from inferlab.engines.speculative.heads.eagle import HeadCache
from inferlab.engines.speculative.heads.target_head import FrozenHead, target_embed
from inferlab.engines.speculative.heads.train import TrainSettings, fit
from inferlab.engines.speculative.sampling import SamplingSettings, filtered_probs
from inferlab.engines.speculative.tree import TokenTree
from tests.engines.speculative.chi_square import chi_square_p_value
from tests.engines.speculative.heads.helpers import HELD_PROMPTS, TRAIN_PROMPTS, tiny_sequences

N_NEW = 40


@pytest.fixture(scope="module")
def head(tiny):
    model, tok = tiny
    s = TrainSettings(kind="eagle", epochs=6, window_tokens=32, batch_windows=2, lr=3e-3,
                      draft_vocab_size=128, eval_k=3)
    seqs = tiny_sequences(model, tok)
    return fit(model, seqs, seqs[:1], s)


def _start(model, head, text):
    """The head's cache over `text`'s real pairs and its output at the last one."""
    u = unit_rms(model.layers_nocache(model.embed_rows(torch.tensor(text))))
    embed = target_embed(model)
    cache = HeadCache(head.dims, len(text) + 16)
    with torch.no_grad():
        out = head.module(u[None, :-1], embed(torch.tensor(text[1:]))[None], 0, cache)[0, -1]
    return cache, out


def test_a_tree_of_width_one_is_the_chain(tiny, head):
    model, tok = tiny
    scorer, embed = FrozenHead(model, head.vocab), target_embed(model)
    text = tok.encode(HELD_PROMPTS[0])
    for depth in (1, 3, 5):
        cache, out = _start(model, head, text)
        paths = eagle_tree(head.module, scorer, embed, cache, out, depth, 1)
        assert cache.length == len(text) - 1  # the tree leaves the cache as it was
        chain, _ = eagle_chain(head.module, scorer, embed, cache, out, depth)
        assert paths == [tuple(chain)]


@pytest.mark.parametrize("width", [2, 3])
def test_each_child_is_among_the_top_tokens_of_its_path_run_as_a_chain(tiny, head, width):
    """Every node's children are the top `width` draft tokens of the head's output on that
    node's path, recomputed one pair at a time through the ordinary cached forward: the tree
    forward's masks and positions give each node exactly its ancestors."""
    model, tok = tiny
    scorer, embed = FrozenHead(model, head.vocab), target_embed(model)
    text = tok.encode(TRAIN_PROMPTS[1])
    depth = 4
    cache, out = _start(model, head, text)
    paths = eagle_tree(head.module, scorer, embed, cache, out, depth, width)
    assert 1 <= len(paths) <= width
    nodes = len(TokenTree.from_paths(paths))
    assert nodes <= depth * width
    assert len(set(paths)) == len(paths)
    with torch.no_grad():
        for path in paths:
            length = cache.length
            feat = out
            for i, token in enumerate(path):
                top = scorer.vocab.d2t[scorer(feat).topk(width).indices].tolist()
                assert token in top, (path, i)
                feat = head.module(feat.view(1, 1, -1), embed(torch.tensor([token])).view(1, 1, -1),
                                   cache.length, cache)[0, -1]
            cache.truncate(length)


def test_rerank_keeps_the_most_confident_tree_within_its_budgets():
    # root ─ a(-0.1) ─ c(-0.3) ─ e(-0.35)
    #      │         └ d(-0.9)
    #      └ b(-0.2) ─ f(-1.5)
    tokens = [10, 20, 30, 40, 50, 60]
    parents = [-1, -1, 0, 0, 2, 1]
    conf = [-0.1, -0.2, -0.3, -0.9, -0.35, -1.5]
    assert _rerank(tokens, parents, conf, budget=10, width=2) == [(10, 30, 50), (20, 60)]
    assert _rerank(tokens, parents, conf, budget=2, width=3) == [(10,), (20,)]
    assert _rerank(tokens, parents, conf, budget=3, width=1) == [(10, 30, 50)]
    assert _rerank(tokens, parents, conf, budget=10, width=3) == [(10, 30, 50), (10, 40),
                                                                   (20, 60)]
    assert _rerank(tokens, parents, conf, budget=4, width=3) == [(20,), (10, 30, 50)]


@pytest.mark.parametrize("width", [2, 3])
@pytest.mark.parametrize("k", [2, 4])
def test_greedy_with_eagle_trees_equals_plain_greedy(tiny, head, width, k):
    model, tok = tiny
    decoder = SpeculativeDecoder(model, EagleDrafter(model, head, tokenizer=tok), k=k,
                                 tokenizer=tok, tree_width=width)
    accepted, branched = 0, 0
    for text in (*TRAIN_PROMPTS[:2], *HELD_PROMPTS):
        ids = tok.encode(text)
        ref = generate(model, [ids], max_new_tokens=N_NEW).generations[0].token_ids
        run = decoder.generate(ids, N_NEW)
        assert run.token_ids == tuple(ref), text
        # after the prompt's step every step drafts: each tree step handed the head the
        # accepted path's features
        assert all(s.drafted or s.tree_tokens for s in run.steps[1:-1])
        accepted += sum(sum(s.accepted) for s in run.steps)
        branched += sum(len(s.tree_tokens) > len(s.drafted) for s in run.steps)
    assert accepted > 0
    assert branched > 0  # real trees, not chains


def test_sampled_eagle_trees_run_seeded(tiny, head):
    model, tok = tiny
    sampling = SamplingSettings(temperature=0.8)
    outs = []
    for _ in range(2):
        drafter = EagleDrafter(model, head, settings=sampling, seed=3, tokenizer=tok)
        decoder = SpeculativeDecoder(model, drafter, k=3, settings=sampling, seed=5,
                                     tokenizer=tok, tree_width=3)
        run = decoder.generate(tok.encode(HELD_PROMPTS[1]), 30)
        assert len(run.token_ids) == 30
        outs.append(run.token_ids)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("width", [1, 3])
def test_sampled_eagle_drafts_keep_the_targets_distribution(tiny, head, width):
    """At temperature 2 the second emitted token (the first one a head drafted for) is
    distributed as the target's marginal Σ_y1 p(y1 | prompt) · p(y2 | prompt, y1), for a
    chain (width 1, rejection sampling against the head's q) and a dynamic tree (width 3,
    certain candidates)."""
    model, tok = tiny
    settings = SamplingSettings(temperature=2.0)
    prompt = tok.encode(TRAIN_PROMPTS[0])
    with torch.no_grad():
        p1 = filtered_probs(model.forward_nocache(torch.tensor(prompt)), settings)[0].double()
        marginal = torch.zeros_like(p1)
        for y1 in torch.nonzero(p1 > 1e-9).flatten().tolist():
            p2 = filtered_probs(model.forward_nocache(torch.tensor(prompt + [y1])), settings)[0]
            marginal += p1[y1] * p2.double()
    drafter = EagleDrafter(model, head, settings=settings, seed=1, tokenizer=tok)
    decoder = SpeculativeDecoder(model, drafter, k=3, settings=settings, seed=2,
                                 tokenizer=tok, tree_width=width)
    second, drafted = [], 0
    for _ in range(600):
        decoder.start(prompt, 4)
        out = list(decoder.step().token_ids)  # the prompt's step: one token, no draft
        step = decoder.step()
        drafted += bool(step.drafted)
        second.append((out + list(step.token_ids))[1])
    assert drafted == 600
    p_value = chi_square_p_value(torch.tensor(second), marginal)
    assert p_value > 0.001, p_value
