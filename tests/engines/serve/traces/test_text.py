"""Block ids become text for a real server: shared ids ⇔ shared text, exactly; every word one
SmolLM2 token, so a prompt of n words is n tokens and a shared block a shared token run."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.model.gguf_loader import open_gguf
from inferlab.engines.model.gguf_tokenizer import tokenizer_from_gguf
from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.traces.text import (
    TRACE_WORDS,
    block_words,
    prompt_text,
    prompt_words,
    words_text,
)
from inferlab.engines.serve.traces.window import parse_window

BLOCK = 4


def _common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_a_block_is_fixed_by_its_id_and_the_text_is_its_words():
    a = block_words(7, 5)
    block_words.cache_clear()
    assert block_words(7, 5) == a  # the seed, not the cache
    assert words_text((0, 1, 2)) == " " + " ".join(TRACE_WORDS[:3])
    r = TraceRequest(0.0, 7, 1, (7, 8), 5)
    assert prompt_words(r, 0) == (a + block_words(8, 5))[:7]
    assert prompt_text(r, 0) == words_text(prompt_words(r, 0))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 12), min_size=0, max_size=5),
                          st.integers(0, 3)), min_size=2, max_size=6))
def test_shared_ids_share_text_and_no_others(rows):
    """Two prompts agree on exactly their shared leading blocks (whole blocks: never a whole
    further block by chance), and block k of one is block m of another iff the ids are equal;
    tails (past the listed ids) are nobody else's."""
    records = [TraceRequest(0.0, len(ids) * BLOCK + tail, 1, tuple(ids), BLOCK)
               for ids, tail in rows]
    words = [prompt_words(r, i) for i, r in enumerate(records)]
    for i, (ri, wi) in enumerate(zip(records, words, strict=True)):
        assert len(wi) == ri.input_tokens
        for j, (rj, wj) in enumerate(zip(records, words, strict=True)):
            if i == j:
                continue
            shared_ids = _common_prefix(ri.block_hashes, rj.block_hashes)
            shared_words = _common_prefix(wi, wj)
            assert shared_ids * BLOCK <= shared_words < (shared_ids + 1) * BLOCK
            for k, a in enumerate(ri.block_hashes):
                for m, b in enumerate(rj.block_hashes):
                    same = wi[k * BLOCK:(k + 1) * BLOCK] == wj[m * BLOCK:(m + 1) * BLOCK]
                    assert same == (a == b)
            tail_i = wi[len(ri.block_hashes) * BLOCK:]
            if tail_i:
                assert tail_i != wj[len(rj.block_hashes) * BLOCK:][:len(tail_i)]


@pytest.fixture(scope="module")
def smollm2_tokenizer(smollm2_path):
    return tokenizer_from_gguf(open_gguf(smollm2_path))


def test_every_word_is_one_smollm2_token_and_a_prompt_of_n_words_n_tokens(smollm2_tokenizer):
    tok = smollm2_tokenizer
    assert len(set(TRACE_WORDS)) == len(TRACE_WORDS) == 255
    assert [w for w in TRACE_WORDS if len(tok.encode(" " + w)) != 1] == []
    a = TraceRequest(0.0, 50, 1, (1, 2, 3), 16)
    b = TraceRequest(0.0, 40, 1, (1, 2, 9), 16)
    ta, tb = (tok.encode(prompt_text(r, i)) for i, r in enumerate((a, b)))
    assert (len(ta), len(tb)) == (50, 40)
    assert ta[:32] == tb[:32] and ta[32] != tb[32]  # two shared blocks, token for token
    assert tok.encode(words_text(block_words(3, 16))) == ta[32:48]


@pytest.mark.parametrize("text, window", [
    (None, None), ("10:70", (10.0, 70.0)), (":70", (0.0, 70.0)),
    ("10:", (10.0, float("inf"))), ("2.5:3", (2.5, 3.0))])
def test_window_text(text, window):
    assert parse_window(text) == window


@pytest.mark.parametrize("text", ["a:b", "1:x", "::", "5:2", "3:3", "-1:4", "nan:5", "1:nan"])
def test_a_bad_window_names_the_option(text):
    with pytest.raises(ValueError, match="--window must be START:END seconds"):
        parse_window(text)
