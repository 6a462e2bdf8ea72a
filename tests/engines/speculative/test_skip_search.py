"""The training-free skip self-draft (`skip:<layers>`, `skip:auto`) on a 5-layer tiny model:
its names parse and print back; greedy speculative output with it is plain greedy output;
the greedy search's figures equal agreement recomputed from scratch with `forward_nocache`
(the search resumes from cached hidden states: it must not change the answer); the draft
cost is the byte ratio by hand; the result is cached and a broken cache file is searched
again."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from inferlab.engines.labs.speculative.drafters import make_drafter
from inferlab.engines.labs.speculative.settings import parse_drafter
from inferlab.engines.model.generate import generate
from inferlab.engines.model.llama import held_bytes
from inferlab.engines.model.tiny import tiny_model, tiny_moe_model
from inferlab.engines.speculative import skip_search
from inferlab.engines.speculative.decoder import SpeculativeDecoder
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.model_drafter import (
    SkipDrafter,
    layer_skip_model,
    skip_layers_model,
    skip_spec,
)
from inferlab.engines.speculative.sampling import GREEDY
from tests.torch_fixtures import TINY_GEMMA3

N_LAYERS = 5
TEXTS = [torch.tensor(list(b"the cat sat on the mat. the cat sat on the mat.")),
         torch.tensor(list(b"abcabcabd, abcabcabd"))]


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def deep(request):
    """A 5-layer tiny model: the Llama layout, and Gemma 3's (√d-scaled embeddings, post-norms,
    windows of 8 tokens: the texts are longer)."""
    if request.param == "gemma3":
        return tiny_model(**(TINY_GEMMA3 | dict(
            n_layers=N_LAYERS, layer_types=("sliding", "sliding", "full", "sliding", "full"))))
    return tiny_model(n_layers=N_LAYERS)


def agreement(target, draft) -> float:
    """Share of positions where the draft's argmax is the target's, recomputed whole."""
    hits = n = 0
    for t in TEXTS:
        want = target.forward_nocache(t, all_logits=True)[:-1].argmax(-1)
        got = draft.forward_nocache(t, all_logits=True)[:-1].argmax(-1)
        hits, n = hits + int((got == want).sum()), n + want.numel()
    return hits / n


@given(st.sets(st.integers(0, 40), min_size=1, max_size=12))
def test_a_skip_spec_parses_back_to_its_layers(layers):
    spec = skip_spec(sorted(layers))
    assert parse_drafter(spec) == ("skip", tuple(sorted(layers)))


def test_skip_names_by_hand():
    assert skip_spec([12, 3, 5, 6, 7, 8, 9]) == "skip:3,5-9,12"
    assert parse_drafter("skip:3,5-9,12") == ("skip", (3, 5, 6, 7, 8, 9, 12))
    assert parse_drafter("skip:auto") == ("skip", "auto")
    for bad in ("skip:", "skip:3-1", "skip:3,3", "skip:2,1-3", "skip:a", "skip:-1", "skip:1,"):
        with pytest.raises(ValueError, match="skip:auto"):
            parse_drafter(bad)


def test_skip_model_runs_the_kept_layers_in_order(deep):
    model, _ = deep
    draft = skip_layers_model(model, [1, 3])
    assert [id(lw) for lw in draft.layers] == [id(model.layers[i]) for i in (0, 2, 4)]
    assert draft.config.n_layers == 3 and draft.lm_head is model.lm_head
    for bad in ([], [0, 1, 2, 3, 4], [5], [1, 1], [True]):
        with pytest.raises(SpeculativeError, match="skipped layers"):
            skip_layers_model(model, bad)


@pytest.mark.parametrize("skipped", [(1,), (1, 2, 3), (0, 4)])
def test_greedy_speculative_output_with_a_skip_draft_is_plain_greedy_output(deep, skipped):
    model, tok = deep
    prompt = list(b"the cat sat on the mat. the cat")
    ref = generate(model, [prompt], max_new_tokens=24).generations[0].token_ids
    decoder = SpeculativeDecoder(model, SkipDrafter(model, skipped), k=3, tokenizer=tok,
                                 block_size=4)
    assert decoder.generate(prompt, 24).token_ids == ref


def test_the_search_matches_agreement_recomputed_from_scratch(deep):
    model, _ = deep
    result = skip_search.search_skip_set(model, TEXTS, max_skipped=3, patience=9,
                                          min_alpha=0.0)
    assert [len(c.skipped) for c in result.path] == list(range(1, len(result.path) + 1))
    for before, after in zip(result.path, result.path[1:], strict=False):
        assert set(before.skipped) < set(after.skipped)  # greedy: one more layer each round
    # round one tries every intermediate layer alone and keeps the best of them
    singles = {i: agreement(model, skip_layers_model(model, [i]))
               for i in range(1, N_LAYERS - 1)}
    assert result.path[0].alpha == pytest.approx(max(singles.values()))
    assert singles[result.path[0].skipped[0]] == pytest.approx(max(singles.values()))
    for c in result.path:
        assert 0 not in c.skipped and N_LAYERS - 1 not in c.skipped
        assert c.alpha == pytest.approx(agreement(model, skip_layers_model(model, c.skipped)))
        n_kept = N_LAYERS - len(c.skipped)
        assert c.first_layers_alpha == pytest.approx(
            agreement(model, layer_skip_model(model, n_kept)))
    assert result.best == max(result.path, key=lambda c: c.predicted_speedup)
    assert result.tokens == sum(t.numel() - 1 for t in TEXTS)


def test_draft_cost_is_the_byte_ratio(deep):
    model, _ = deep
    layer = skip_search.layer_bytes(model, 0)
    head = model.lm_head.nbytes
    assert skip_search.draft_cost(model, [1, 2]) == pytest.approx(
        (head + 3 * layer) / (head + N_LAYERS * layer))


def test_a_mixture_of_experts_layer_costs_its_router_and_k_of_its_experts():
    model, _ = tiny_moe_model(n_layers=3)
    lw, c = model.layers[1], model.config
    expert = held_bytes(lw.moe.experts[0].gate_up) + held_bytes(lw.moe.experts[0].down)
    dense = sum(held_bytes(t) for t in (lw.attn_norm, lw.qkv, lw.o, lw.mlp_norm))
    assert skip_search.layer_bytes(model, 1) == (dense + held_bytes(lw.moe.router)
                                                 + c.n_experts_active * expert)


def test_best_k_by_hand():
    # alpha 0.8, c 0.1, v(K) = 1 + 0.1 K: K=1 1.8/1.2 = 1.5; K=2 2.44/1.4 = 1.743;
    # K=3 2.952/1.6 = 1.845; K=4 3.3616/1.8 = 1.868; K=5 3.689/2.0 = 1.845
    assert skip_search.best_k(0.8, 0.1, 5, 0.1) == (4, pytest.approx(3.3616 / 1.8))


def test_the_search_is_cached_and_a_broken_cache_searched_again(deep, tmp_path, monkeypatch):
    model, _ = deep
    first = skip_search.cached_search(model, TEXTS, tmp_path, max_skipped=2)
    files = list((tmp_path / "skip_auto").glob("*.json"))
    assert len(files) == 1

    def no_search(*a, **kw):
        raise AssertionError("searched again")

    monkeypatch.setattr(skip_search, "search_skip_set", no_search)
    assert skip_search.cached_search(model, TEXTS, tmp_path, max_skipped=2) == first
    files[0].write_text(json.dumps({"best": {"skipped": ["x"]}}), encoding="utf-8")
    monkeypatch.undo()
    assert skip_search.cached_search(model, TEXTS, tmp_path, max_skipped=2) == first
    other = [TEXTS[0][:20]]  # other text: another key, another search
    skip_search.cached_search(model, other, tmp_path, max_skipped=2)
    assert len(list((tmp_path / "skip_auto").glob("*.json"))) == 2
    skip_search.cached_search(model, TEXTS, tmp_path, max_skipped=1)  # another search setting
    assert len(list((tmp_path / "skip_auto").glob("*.json"))) == 3


def test_skip_auto_names_the_layers_it_chose(deep):
    model, tok = deep
    drafter = make_drafter("skip:auto", model, tok, GREEDY, 0, 256)
    assert isinstance(drafter, SkipDrafter)
    assert drafter.name == skip_spec(drafter.skipped)
    assert parse_drafter(drafter.name) == ("skip", drafter.skipped)


def test_skip_auto_refuses_a_target_without_intermediate_layers():
    model, tok = tiny_model(n_layers=2)
    with pytest.raises(SpeculativeError, match="intermediate"):
        skip_search.search_skip_set(model, TEXTS)
