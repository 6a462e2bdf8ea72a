"""The tokenizer a GGUF file describes in its `tokenizer.ggml.*` metadata.

Two of llama.cpp's vocabulary kinds (`tokenizer.ggml.model`): "gpt2", a byte-level BPE with
its merges listed (SmolLM2, Llama 3, Qwen), and "llama", a SentencePiece-style BPE whose
merges follow from the token scores (Llama 2, Gemma). Any other kind is refused by name.

Nothing is trusted before it is checked: every array must have the type and length the
vocabulary needs, every token id it names must lie in it, and the vocabulary must fit the
model's embedding (`vocab_size`), else `ModelLoadError` names the file and the field.
The file's own chat template comes with it (`chat_template.py`, rendered in a sandbox).

`g` is a `gguf_loader.GGUFFile`, named here by what is used of it (`GGUFMetadata`): the
loader imports this module, so this one must not import the loader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from inferlab.engines.model.chat_template import load_chat_template
from inferlab.engines.model.config import show
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.tokenizer import Tokenizer

TOKENIZER_KINDS = ("gpt2", "llama")
# llama.cpp's token types (tokenizer.ggml.token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
_TYPES = (0, NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE)  # 0: undefined
# Turn ends a file may not name in `eot_token_id`; llama.cpp finds them by their text too.
_END_OF_TURN_TEXTS = ("<end_of_turn>",)


class GGUFMetadata(Protocol):
    """What the tokenizer reads of a `GGUFFile`: its path and its checked metadata values."""

    path: Path

    def get(self, key: str, default: Any = None, kind: type | None = None,
            items: type | None = None) -> Any: ...

    def require(self, key: str, kind: type | None = None, items: type | None = None
                ) -> Any: ...


def tokenizer_from_gguf(g: GGUFMetadata, vocab_size: int | None = None) -> Tokenizer:
    """The file's tokenizer; `vocab_size` (the embedding's rows), when given, bounds it."""
    kind = g.get("tokenizer.ggml.model", kind=str)
    if kind not in TOKENIZER_KINDS:
        raise ModelLoadError(f"{g.path}: metadata 'tokenizer.ggml.model' is {show(kind)}: "
                             f"not a tokenizer we build (supported: {', '.join(TOKENIZER_KINDS)})")
    tokens = g.require("tokenizer.ggml.tokens", list, items=str)
    if not tokens:
        raise ModelLoadError(f"{g.path}: metadata 'tokenizer.ggml.tokens' is empty")
    if vocab_size is not None and len(tokens) > vocab_size:
        raise ModelLoadError(f"{g.path}: metadata 'tokenizer.ggml.tokens' holds {len(tokens):,} "
                             f"tokens, more than the model's vocabulary of {vocab_size:,}")
    types = _token_types(g, len(tokens), required=(kind == "llama"))
    control = [i for i, t in enumerate(types) if t in (CONTROL, UNKNOWN)]
    user_defined = [i for i, t in enumerate(types) if t == USER_DEFINED]

    def token_id(key: str) -> int | None:
        value = g.get(key, kind=int)
        if value is not None and not 0 <= value < len(tokens):
            raise ModelLoadError(f"{g.path}: metadata {key!r} is {show(value)}, not a token id "
                                 f"(the vocabulary has {len(tokens):,} tokens)")
        return value

    bos = token_id("tokenizer.ggml.bos_token_id")
    eos_ids = [token_id("tokenizer.ggml.eos_token_id"), token_id("tokenizer.ggml.eot_token_id")]
    if eos_ids[1] is None:
        eos_ids += [i for i in control if tokens[i] in _END_OF_TURN_TEXTS]
    common = dict(
        eos_token_ids=list(dict.fromkeys(t for t in eos_ids if t is not None)),
        bos_token_id=bos,
        # llama.cpp adds BOS to a SentencePiece vocabulary that does not say otherwise
        add_bos=g.get("tokenizer.ggml.add_bos_token", kind == "llama", kind=bool),
        chat_template=load_chat_template(
            g.get("tokenizer.chat_template", kind=str),
            bos_token=tokens[bos] if bos is not None else None,
            eos_token=tokens[eos_ids[0]] if eos_ids[0] is not None else None),
        name=g.get("general.name", g.path.stem, kind=str), origin=str(g.path))
    if kind == "gpt2":
        return Tokenizer.from_bpe(
            tokens, g.require("tokenizer.ggml.merges", list, items=str),
            pre=g.get("tokenizer.ggml.pre", "default", kind=str),
            special_ids=[i for i, t in enumerate(types) if t in (CONTROL, USER_DEFINED)],
            **common)
    scores = g.require("tokenizer.ggml.scores", list, items=float)
    if len(scores) != len(tokens):
        raise ModelLoadError(f"{g.path}: metadata 'tokenizer.ggml.scores' has {len(scores):,} "
                             f"entries for {len(tokens):,} tokens")
    return Tokenizer.from_sentencepiece_bpe(
        tokens, scores, special_ids=control, user_defined_ids=user_defined,
        unk_token_id=token_id("tokenizer.ggml.unknown_token_id"),
        add_space_prefix=g.get("tokenizer.ggml.add_space_prefix", False, kind=bool),
        **common)


def _token_types(g: GGUFMetadata, n_tokens: int, required: bool) -> list[int]:
    """`tokenizer.ggml.token_type`: one of llama.cpp's types per token (a byte-level file
    may list fewer, or none: the rest are normal)."""
    key = "tokenizer.ggml.token_type"
    types = (g.require(key, list, items=int) if required
             else g.get(key, [], kind=list, items=int))
    if len(types) > n_tokens or (required and len(types) != n_tokens):
        raise ModelLoadError(f"{g.path}: metadata {key!r} has {len(types):,} entries for "
                             f"{n_tokens:,} tokens")
    bad = next((t for t in types if t not in _TYPES), None)
    if bad is not None:
        raise ModelLoadError(f"{g.path}: metadata {key!r} holds {show(bad)}, not a token type "
                             f"(llama.cpp's are 0 to 6)")
    return types
