"""The EAGLE head shipped in assets/heads: it loads for the shipped SmolLM2 (its header's
model hash is that file's sha256), drafts there with greedy output equal to plain greedy, and
is refused, by name, for any other model. Slow: loads SmolLM2."""

from __future__ import annotations

import pytest

from inferlab.engines.model.generate import generate
from inferlab.engines.speculative.decoder import SpeculativeDecoder
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.head_drafter import EagleDrafter
from inferlab.engines.speculative.heads.head_file import load_head, read_record
from inferlab.engines.speculative.heads.model_hash import model_hash
from inferlab.engines.speculative.heads.shipped import find_head, shipped_head_path

pytestmark = pytest.mark.slow


def test_shipped_head_is_smollm2s_and_drafts_exactly(smollm2, tmp_path):
    model, tok = smollm2
    path = shipped_head_path("eagle")
    assert path is not None and path.stat().st_size < 10_000_000  # fp16: a few MB
    assert read_record(path)["model_hash"] == model_hash(model)
    assert find_head(model, "eagle", tmp_path) == path  # an empty user cache: the shipped one
    head = load_head(path, model)
    ids = tok.encode_prompt("How do I keep bread fresh for a week?")
    plain = generate(model, [ids], max_new_tokens=40).generations[0].token_ids
    dec = SpeculativeDecoder(model, EagleDrafter(model, head, tokenizer=tok), k=3, tokenizer=tok)
    run = dec.generate(ids, 40)
    assert run.token_ids == tuple(plain)
    accepted = sum(s.n_accepted for s in run.steps)
    assert accepted > 0  # it drafts usefully, not only exactly


def test_shipped_head_is_refused_for_another_model(tiny, tmp_path):
    model, _ = tiny
    path = shipped_head_path("eagle")
    with pytest.raises(SpeculativeError, match="trained for another model"):
        load_head(path, model)
    assert find_head(model, "eagle", tmp_path) is None
