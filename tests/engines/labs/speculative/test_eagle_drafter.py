"""The lab's `eagle` drafter: found in the user cache (else shipped), refused by name where the
model has no head; the bench's `eagle` figures: greedy output equal to plain, the best row's
speedup and acceptance length."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.speculative import bench, drafters
from inferlab.engines.labs.speculative.settings import parse_drafter
from inferlab.engines.labs.speculative.sweep import plain_decode
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.head_drafter import EagleDrafter, MedusaDrafter
from inferlab.engines.speculative.heads.build import train_head
from inferlab.engines.speculative.heads.head_file import head_path
from inferlab.engines.speculative.heads.model_hash import model_hash
from inferlab.engines.speculative.heads.shipped import find_head
from inferlab.engines.speculative.heads.train import TrainSettings
from inferlab.engines.speculative.sampling import GREEDY as SPEC_GREEDY


def test_eagle_and_medusa_parse():
    assert parse_drafter("eagle") == ("eagle", None)
    assert parse_drafter("medusa") == ("medusa", None)
    with pytest.raises(ValueError, match="tiny, eagle or medusa"):
        parse_drafter("eagle:3")


@pytest.mark.parametrize(("kind", "label"), [("eagle", "EAGLE head"),
                                             ("medusa", "Medusa heads")])
def test_no_head_is_refused_by_name(tiny, tmp_path, monkeypatch, kind, label):
    model, tok = tiny
    monkeypatch.setattr(drafters, "user_cache", lambda: tmp_path)
    assert drafters.head_path(model, kind) is None
    with pytest.raises(SpeculativeError, match=f"no {label} .* train-head --kind {kind}"):
        drafters.make_drafter(kind, model, tok, SPEC_GREEDY, 0, 256)


@pytest.fixture
def cached_head(tiny, tmp_path, monkeypatch):
    """A briefly trained EAGLE head for the tiny model in a user cache of its own."""
    model, tok = tiny
    monkeypatch.setattr(drafters, "user_cache", lambda: tmp_path)
    monkeypatch.setattr("inferlab.engines.speculative.heads.training_data.train_prompts",
                        lambda: ("The lamp", "Bread and"))
    monkeypatch.setattr("inferlab.engines.speculative.heads.training_data.held_out_prompts",
                        lambda: ("The canal",))
    monkeypatch.setattr("inferlab.engines.speculative.heads.training_data.train_texts",
                        lambda: {})
    s = TrainSettings(epochs=1, window_tokens=32, draft_vocab_size=64, max_new_tokens=24,
                      eval_k=2)
    return train_head(model, tok, s, tmp_path).path


def test_a_cached_medusa_head_drafts_in_the_lab(tiny, tmp_path, cached_head, monkeypatch):
    """`medusa` finds the user cache's Medusa heads (the same cached features as the EAGLE
    head's) and decodes to plain greedy's output; the bench measures both heads' rows in each
    group (Medusa: chains at its Ks), and says which files it read."""
    model, tok = tiny
    s = TrainSettings(kind="medusa", epochs=1, window_tokens=32, draft_vocab_size=64,
                      max_new_tokens=24, eval_k=2, n_medusa=3)
    path = train_head(model, tok, s, tmp_path).path
    assert drafters.head_path(model, "medusa") == path
    d = drafters.make_drafter("medusa", model, tok, SPEC_GREEDY, 0, 256)
    assert isinstance(d, MedusaDrafter)
    ids = [tok.encode("Over the hill")]
    plain = plain_decode(model, ids, 16, ())
    row = bench._row(model, tok, "medusa", 3, ids, 16, [plain], 1)
    assert row["outputs_equal"] is True
    monkeypatch.setattr(bench, "load_model", lambda name, dtype: (model, tok))
    out = bench.run_speculative_bench({"g": ["Over the hill"]}, new_tokens=8, drafters=(),
                                      ks=(2,), transformers=False, adaptive=False,
                                      skip_auto_group=None, eagle_ks=(2,), medusa_ks=(1, 3))
    assert out["eagle_head"] == str(cached_head) and out["medusa_head"] == str(path)
    medusa = out["g"]["medusa"]
    assert [(r["k"], r["tree_width"]) for r in medusa["results"]] == [(1, 1), (3, 1)]
    assert medusa["outputs_equal"] is True and medusa["head_path"] == str(path)
    assert [r["k"] for r in out["g"]["eagle"]["results"]][:1] == [2]


def test_cached_head_is_found_and_drafts(tiny, tmp_path, cached_head):
    model, tok = tiny
    assert cached_head == head_path(tmp_path, model_hash(model), "eagle")
    assert find_head(model, "eagle", tmp_path) == cached_head
    assert drafters.head_path(model, "eagle") == cached_head
    d = drafters.make_drafter("eagle", model, tok, SPEC_GREEDY, 0, 256)
    assert isinstance(d, EagleDrafter)


def test_bench_eagle_figures(tiny, cached_head):
    model, tok = tiny
    ids = [tok.encode(p) for p in ("Over the hill", "Keep the tide")]

    def plain_now():
        return [plain_decode(model, ids, 16, ())]

    fig = bench._head_figures("eagle", model, tok, ids, 16, plain_now, 1, (), None, (2, 3),
                              cached_head)
    trees = [(k, w) for k, w in bench.EAGLE_TREES]
    assert [(r["k"], r["tree_width"]) for r in fig["results"]] == [(2, 1), (3, 1), *trees]
    assert fig["outputs_equal"] is True  # greedy speculative output == plain greedy
    best = max(fig["results"], key=lambda r: r["speedup_wall"])
    assert fig["speedup_wall"] == best["speedup_wall"] and fig["k"] == best["k"]
    assert fig["tree_width"] == best["tree_width"]
    assert fig["accept_len_mean"] == best["tokens_per_target_forward"] >= 1.0
    assert fig["head_path"] == str(cached_head)


def test_the_session_header_carries_the_heads_held_out_acceptance(tiny, cached_head):
    from inferlab.engines.labs.speculative.session import speculative_session
    from inferlab.engines.labs.speculative.settings import speculative_defaults
    from inferlab.engines.speculative.heads.head_file import read_record

    curve = read_record(cached_head)["training"]["curve"]
    session = speculative_session(speculative_defaults() | {"drafter": "eagle", "k": 2,
                                                            "max_tokens": 8})
    accept = session.header().head_accept_by_position
    assert accept and accept == tuple(curve[-1]["accept_by_position"])


def test_eagle_train_s_is_the_heads_record_of_its_time_from_nothing(cached_head, tmp_path):
    from inferlab.engines.speculative.heads.head_file import read_record

    training = read_record(cached_head)["training"]
    assert not training["features_cached"]  # built in this cache: its first build timed
    assert bench._train_s(cached_head) == training["features_build_s"] + training["train_s"]
    assert training["features_build_s"] > 0
    assert bench._train_s(None) is None
