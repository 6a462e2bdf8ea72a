"""Batched self-distillation: the tokens are plain greedy generation's, one prompt at a time;
the kept hidden states and greedy tokens are what the target computes for those tokens with
no cache (features.sequence_features, the reference)."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.speculative.heads import distill as distill_module
from inferlab.engines.speculative.heads.distill import distill
from inferlab.engines.speculative.heads.features import (
    cached_sequences,
    load_sequences,
    sequence_features,
)

PROMPTS = ("The ferry", "A lamp in the", "Bread and", "Keep the tide", "Over the hill")


@pytest.mark.parametrize("batch, head_rows", [(1, 256), (2, 256), (5, 256), (5, 3)])
def test_tokens_are_plain_greedy_and_features_match_a_nocache_read(tiny, batch, head_rows,
                                                                   monkeypatch):
    # head_rows 3: a prompt's greedy labels come from its hidden states in pieces
    monkeypatch.setattr(distill_module, "HEAD_ROWS", head_rows)
    model, tok = tiny
    ids = [tok.encode(p) for p in PROMPTS]
    new = [0, 3, 12, 20, 7]  # 0: a text read as it is, no answer
    seqs, stats = distill(model, [(f"p{i}", p, n) for i, (p, n) in enumerate(zip(ids, new, strict=True))],
                          batch)
    assert [s.name for s in seqs] == [f"p{i}" for i in range(len(PROMPTS))]
    for p, n, s in zip(ids, new, seqs, strict=True):
        if n == 0:
            assert s.tokens.tolist() == p
        else:  # n answer tokens run, and the greedy one after them
            ref = generate(model, [p], max_new_tokens=n + 1).generations[0].token_ids
            assert s.tokens.tolist() == p + list(ref[:n])
            assert int(s.greedy[-1]) == ref[n]
        want = sequence_features(model, s.name, s.tokens.tolist())
        assert torch.equal(s.greedy, want.greedy)
        # and against the logits of every position in one product (greedy_tokens aside)
        whole = model.forward_nocache(s.tokens, all_logits=True).argmax(-1)
        assert torch.equal(s.greedy, whole)
        torch.testing.assert_close(s.hidden, want.hidden, rtol=1e-4, atol=1e-4)
    assert stats.answer_tokens == sum(new)
    assert stats.run_tokens == sum(len(s) for s in seqs)


def test_a_stop_token_ends_the_answer_and_is_its_last_greedy(tiny):
    model, tok = tiny
    p = tok.encode("Over the hill")
    ref = generate(model, [p], max_new_tokens=10).generations[0].token_ids
    stop = ref[4]  # the fifth answer token stops it (the first four are not that token)
    cut = ref.index(stop)
    seqs, stats = distill(model, [("a", p, 10)], 1, stop_token_ids=(stop,))
    assert seqs[0].tokens.tolist() == p + list(ref[:cut])
    assert int(seqs[0].greedy[-1]) == stop
    assert stats.answer_tokens == cut


def test_bad_input_is_named(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match="batch"):
        distill(model, [("a", [1, 2], 3)], 0)
    with pytest.raises(ValueError, match="b: empty prompt"):
        distill(model, [("b", [], 3)], 1)
    with pytest.raises(ValueError, match="c: .* context"):
        distill(model, [("c", [1], model.config.max_position)], 1)


def test_features_file_reads_back_and_serves_the_cache(tiny, tmp_path):
    """save_sequences -> load_sequences gives the same sequences; a second cached_sequences
    call reads the file instead of generating again."""
    model, tok = tiny
    args = (model, tok, "weights:x", tmp_path, PROMPTS[:3], {"t": "Some text to read."}, 6, 64)
    built: dict = {}
    first, cached = cached_sequences(*args, stats_out=built)
    assert not cached and len(first) == 4
    assert built["features_build_s"] > 0 and built["distill_sequences"] == 4
    read: dict = {}
    again, cached = cached_sequences(*args, stats_out=read)
    assert cached
    assert read == built  # the first build's figures, kept in the file
    assert [s.name for s in again] == [s.name for s in first]
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.greedy, b.greedy)
        assert torch.equal(a.hidden, b.hidden)
    path = next((tmp_path / "heads").rglob("features-*.safetensors"))
    path.write_bytes(path.read_bytes()[:100])  # truncated: not read, built again
    assert load_sequences(path) is None
    assert not cached_sequences(*args)[1]


def test_fuzz_the_features_files_reader(tiny, tmp_path):
    """Seeded truncations and byte flips of a features file (its header's length, its JSON
    header with the build figures, its tensors): load_sequences gives None or sequences
    that read, stored_stats a dict of numbers by name; neither raises nor hangs."""
    import random

    from inferlab.engines.speculative.heads.features import stored_stats
    from tests.fuzz import flip_bytes, run_cases, truncate

    model, tok = tiny
    args = (model, tok, "weights:x", tmp_path, PROMPTS[:2], {}, 4, 64)
    cached_sequences(*args, stats_out={})
    path = next((tmp_path / "heads").rglob("features-*.safetensors"))
    data = path.read_bytes()
    header = 8 + int.from_bytes(data[:8], "little")
    rng = random.Random(45)
    bad = tmp_path / "bad.safetensors"

    def case(blob: bytes):
        def call():
            bad.write_bytes(blob)
            seqs = load_sequences(bad)
            assert seqs is None or all(len(s.tokens) == len(s.greedy) for s in seqs)
            stats = stored_stats(bad)
            assert all(isinstance(k, str) and isinstance(v, int | float)
                       for k, v in stats.items())
        return call

    cases = []
    for i in range(240):
        label, blob = (truncate(data, rng) if i % 3 == 0 else
                       flip_bytes(data, rng, 0, 8) if i % 3 == 1 else
                       flip_bytes(data, rng, 8, header))
        cases.append((label, case(blob)))
    result = run_cases(cases, allowed=())
    assert not result.failures, result.failures[:3]
