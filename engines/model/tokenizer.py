"""Tokenizers built with the `tokenizers` package: byte-level BPE (GPT-2 style) and
SentencePiece-style BPE (Llama 2, Gemma), plus the ChatML recogniser.

Sources: a GGUF file's vocabulary (`gguf_tokenizer.py` reads the `tokenizer.ggml.*` metadata
and calls the constructors here), a Hugging Face `tokenizer.json`, or plain bytes (256 tokens,
no merges: the tiny test model's).

`chat_template_from_jinja` only recognises ChatML by its markers and never runs the template;
`chat_template.py` renders a model's own Jinja template in a sandbox and supersedes it
(`from_hf_folder` still uses the recogniser until its tests move).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
from tokenizers import Tokenizer as _Backend

from inferlab.engines.model.chat_template import JinjaChatTemplate, load_chat_template
from inferlab.engines.model.errors import ModelLoadError

# llama.cpp's Llama 3 pre-tokenizer regex ("llama-bpe"), split before the byte mapping.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable characters.

    Printable Latin-1 bytes map to themselves; the other 68 take code points 256, 257, ...
    in byte order, so every byte string becomes a string BPE can work on.
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def sentencepiece_merges(tokens: Sequence[str], scores: Sequence[float],
                         skip_ids: set[int] | frozenset[int] = frozenset()
                         ) -> list[tuple[str, str]]:
    """BPE merges implied by a SentencePiece vocabulary: for every token `t` (ids in
    `skip_ids` left out), every cut `t = a + b` where `a` and `b` are tokens too, ranked by
    `t`'s score, highest first (ties: lower id first, then shorter `a`).

    llama.cpp's SPM tokenizer merges the adjacent pair whose joined text is the vocabulary
    entry with the highest score; a BPE whose merge ranks are those scores makes the same
    choices. Tokens matched whole before BPE (control, user-defined) are skipped: no text
    reaching BPE can hold them.
    """
    vocab = {tok: i for i, tok in enumerate(tokens)}
    order = sorted(range(len(tokens)), key=scores.__getitem__, reverse=True)  # stable
    merges: list[tuple[str, str]] = []
    add = merges.append
    for i in order:
        tok = tokens[i]
        if len(tok) < 2 or i in skip_ids:
            continue
        for cut in range(1, len(tok)):
            left = tok[:cut]
            if left in vocab:
                right = tok[cut:]
                if right in vocab:
                    add((left, right))
    return merges


@dataclass(frozen=True)
class ChatTemplate:
    """A chat format we implement ourselves. `kind` is "chatml"; `default_system` is the
    system message the model's template inserts when the conversation has none."""

    kind: str
    default_system: str | None = None

    def render(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """ChatML: `<|im_start|>{role}\\n{content}<|im_end|>\\n` per message, then
        `<|im_start|>assistant\\n` to ask for the reply."""
        msgs = list(messages)
        if self.default_system is not None and (not msgs or msgs[0].get("role") != "system"):
            msgs.insert(0, {"role": "system", "content": self.default_system})
        out = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs)
        return out + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def chat_template_from_jinja(text: str | None) -> ChatTemplate | None:
    """Recognise a template's format from its text (never run it); None if unknown."""
    if not text or "<|im_start|>" not in text or "<|im_end|>" not in text:
        return None
    m = re.search(r"'<\|im_start\|>system\n(.*?)<\|im_end\|>", text, flags=re.DOTALL)
    return ChatTemplate("chatml", m.group(1) if m else None)


class Tokenizer:
    """Text <-> token ids for one model. Special tokens written in the text (e.g.
    `<|im_start|>`) encode to their ids; `decode` drops them unless asked not to."""

    def __init__(self, backend: _Backend, eos_token_ids: Sequence[int] = (),
                 bos_token_id: int | None = None, add_bos: bool = False,
                 chat_template: ChatTemplate | JinjaChatTemplate | None = None,
                 name: str = "") -> None:
        self.backend = backend
        self.eos_token_ids = tuple(eos_token_ids)
        self.bos_token_id = bos_token_id
        self.add_bos = add_bos and bos_token_id is not None
        self.chat_template = chat_template
        self.name = name

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        ids = self.backend.encode(text, add_special_tokens=False).ids
        return [self.bos_token_id, *ids] if self.add_bos else ids

    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special)

    def token_text(self, token_id: int) -> str:
        """One token as text (special tokens kept), e.g. for a token stream view."""
        return self.decode([token_id], skip_special=False)

    def apply_chat(self, messages: str | Sequence[dict], add_generation_prompt: bool = True
                   ) -> str:
        """The chat template applied to `messages` (a string is one user message)."""
        if self.chat_template is None:
            raise ValueError(f"model {self.name or '?'} has no chat template we implement; "
                             "use raw mode")
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        return self.chat_template.render(messages, add_generation_prompt)

    def encode_chat(self, messages: str | Sequence[dict], add_generation_prompt: bool = True
                    ) -> list[int]:
        """Ids of `apply_chat(messages)`. A template that writes the BOS token itself (Gemma's
        `{{ bos_token }}`) gets it once: the text's leading BOS is dropped where `encode`
        adds one, as llama.cpp's server does."""
        text = self.apply_chat(messages, add_generation_prompt)
        bos = self.backend.id_to_token(self.bos_token_id) if self.add_bos else None
        if bos and text.startswith(bos):
            text = text[len(bos):]
        return self.encode(text)

    def encode_prompt(self, text: str, chat: bool = True) -> list[int]:
        """Ids of a user prompt: through the chat template when `chat` and the model has one."""
        if chat and self.chat_template is not None:
            return self.encode_chat(text)
        return self.encode(text)

    # ---- construction -----------------------------------------------------------------------

    @classmethod
    def byte_level(cls, name: str = "bytes") -> Tokenizer:
        """256 tokens, token id = byte value, no merges and no special tokens."""
        table = byte_to_unicode()
        vocab = {table[b]: b for b in range(256)}
        backend = _Backend(models.BPE(vocab=vocab, merges=[]))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        backend.decoder = decoders.ByteLevel()
        return cls(backend, name=name)

    @classmethod
    def from_bpe(cls, tokens: Sequence[str], merges: Sequence[str], pre: str,
                 special_ids: Sequence[int] = (), eos_token_ids: Sequence[int] = (),
                 bos_token_id: int | None = None, add_bos: bool = False,
                 chat_template: ChatTemplate | JinjaChatTemplate | None = None, name: str = "",
                 origin: str = "") -> Tokenizer:
        """A GPT-2-style byte-level BPE from a vocabulary (id order) and "a b" merge strings.

        `pre` names the pre-tokenizer as llama.cpp does: "gpt2"/"default" (GPT-2's regex),
        "smollm" (every digit alone, then GPT-2's regex), "llama-bpe" (Llama 3's regex).
        """
        where = f"{origin}: " if origin else ""
        vocab = {tok: i for i, tok in enumerate(tokens)}
        pairs = []
        for m in merges:
            parts = m.split(" ")
            if len(parts) != 2:
                raise ModelLoadError(f"{where}bad BPE merge {m[:40]!r} (expected two tokens)")
            pairs.append((parts[0], parts[1]))
        try:
            backend = _Backend(models.BPE(vocab=vocab, merges=pairs,
                                          ignore_merges=(pre == "llama-bpe")))
        except Exception as e:  # the tokenizers package raises its own Exception type
            raise ModelLoadError(f"{where}unusable BPE vocabulary or merges: {e}") from None
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if pre in ("gpt2", "default"):
            backend.pre_tokenizer = byte_level
        elif pre == "smollm":
            backend.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Digits(individual_digits=True), byte_level])
        elif pre == "llama-bpe":
            backend.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(_LLAMA3_SPLIT), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        else:
            raise ModelLoadError(f"{where}unsupported BPE pre-tokenizer {pre!r} "
                                 "(supported: gpt2, default, smollm, llama-bpe)")
        backend.decoder = decoders.ByteLevel()
        backend.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                                    for i in special_ids])
        return cls(backend, eos_token_ids, bos_token_id, add_bos, chat_template, name)

    @classmethod
    def from_sentencepiece_bpe(cls, tokens: Sequence[str], scores: Sequence[float],
                               special_ids: Sequence[int] = (),
                               user_defined_ids: Sequence[int] = (),
                               unk_token_id: int | None = None, add_space_prefix: bool = False,
                               eos_token_ids: Sequence[int] = (),
                               bos_token_id: int | None = None, add_bos: bool = False,
                               chat_template: ChatTemplate | JinjaChatTemplate | None = None,
                               name: str = "",
                               origin: str = "") -> Tokenizer:
        """A SentencePiece-style BPE (llama.cpp's "llama" vocabulary) from its tokens and scores.

        Spaces are written "▁" and the text is never split before BPE; the merges are every
        way of cutting a token in two known tokens, best score first (`sentencepiece_merges`),
        which is llama.cpp's rule: merge the adjacent pair whose joined text is the token with
        the highest score. A character outside the vocabulary falls back to its UTF-8 bytes
        (`<0xNN>` tokens). `special_ids` (control tokens) and `user_defined_ids` are matched
        whole in the text before BPE; only the special ones are dropped by `decode`.
        `add_space_prefix` puts a "▁" before each piece of text (SentencePiece's dummy
        prefix) and removes it again when decoding.
        """
        where = f"{origin}: " if origin else ""
        vocab = {tok: i for i, tok in enumerate(tokens)}
        whole = {*special_ids, *user_defined_ids}
        unk = tokens[unk_token_id] if unk_token_id is not None else None
        try:
            backend = _Backend(models.BPE(
                vocab=vocab, merges=sentencepiece_merges(tokens, scores, skip_ids=whole),
                unk_token=unk, fuse_unk=True, byte_fallback=True))
        except Exception as e:  # the tokenizers package raises its own Exception type
            raise ModelLoadError(f"{where}unusable SentencePiece vocabulary: {e}") from None
        spaces = normalizers.Replace(" ", "▁")
        decode = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
        if add_space_prefix:
            backend.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), spaces])
            decode.append(decoders.Strip(" ", 1, 0))  # after Fuse: once, for the whole text
        else:
            backend.normalizer = spaces
        backend.decoder = decoders.Sequence(decode)
        # Matched in the text as written (not after the space normalizer), as llama.cpp does.
        backend.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                                    for i in special_ids if tokens[i]])
        backend.add_tokens([AddedToken(tokens[i], special=False, normalized=False)
                            for i in user_defined_ids if tokens[i]])
        return cls(backend, eos_token_ids, bos_token_id, add_bos, chat_template, name)

    @classmethod
    def from_hf_folder(cls, folder: str | Path, eos_token_ids: Sequence[int] = ()) -> Tokenizer:
        """`tokenizer.json` (+ `tokenizer_config.json` for BOS/EOS and the chat template)."""
        folder = Path(folder)
        path = folder / "tokenizer.json"
        try:
            backend = _Backend.from_file(str(path))
        except Exception as e:  # the tokenizers package raises its own Exception type
            raise ModelLoadError(f"{path}: not a usable tokenizer.json: {e}") from None
        config: dict = {}
        config_path = folder / "tokenizer_config.json"
        if config_path.exists():
            try:
                config = json.loads(config_path.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError) as e:
                raise ModelLoadError(f"{config_path}: not valid JSON: {e}") from None
            if not isinstance(config, dict):
                raise ModelLoadError(f"{config_path}: expected a JSON object")

        def token_id(key: str) -> int | None:
            tok = config.get(key)
            if isinstance(tok, dict):
                tok = tok.get("content")
            return backend.token_to_id(tok) if isinstance(tok, str) else None

        eos = list(eos_token_ids)
        eos_id = token_id("eos_token")
        if eos_id is not None and eos_id not in eos:
            eos.append(eos_id)
        bos_id = token_id("bos_token")
        template = config.get("chat_template")
        template = template if isinstance(template, str) else None
        add_bos = config.get("add_bos_token")
        if add_bos is not None and not isinstance(add_bos, bool):
            raise ModelLoadError(f"{config_path}: field 'add_bos_token' must be true or false")
        if add_bos is None:  # no flag: does tokenizer.json's post-processor prepend BOS?
            try:
                with_special = backend.encode("a", add_special_tokens=True).ids
            except Exception as e:  # the tokenizers package raises its own Exception type
                raise ModelLoadError(f"{path}: not a usable tokenizer.json: {e}") from None
            add_bos = bos_id is not None and with_special[:1] == [bos_id]
        def token_text(key: str) -> str | None:
            tok = config.get(key)
            tok = tok.get("content") if isinstance(tok, dict) else tok
            return tok if isinstance(tok, str) else None

        return cls(backend, eos, bos_id, bool(add_bos),
                   load_chat_template(template, token_text("bos_token"), token_text("eos_token")),
                   folder.name)
