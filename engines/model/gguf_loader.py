"""Load a Llama-family GGUF file (llama.cpp's format): config, weights and tokenizer.

Every tensor is dequantized to fp32 with `gguf.quants.dequantize` (F32, F16, BF16, Q8_0,
Q4_0, Q4_1, K-quants, ...), renamed to Hugging Face's Llama names and cast to the requested
dtype. llama.cpp's converter permutes the rows of W_q and W_k so that its RoPE can rotate
adjacent pairs (x0, x1), (x2, x3), ...; we undo that permutation so the weights fit the
"rotate half" RoPE of `rope.py` and give the same logits as Hugging Face's model.

Any problem (not a GGUF, truncated, a tensor missing or of the wrong shape, an architecture
that is not Llama, a metadata value of the wrong type or out of range) raises
`ModelLoadError` naming the file and what is wrong. Nothing is trusted before it is checked:
the header is walked with every count bounded by the file's size (`gguf_header`) before
the `gguf` package parses it, every metadata value is type- and range-checked before use
(`config.check_field`), and every tensor's shape is compared with the config's before any
tensor is dequantized.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGUFReader, GGUFValueType
from gguf.quants import dequantize

from inferlab.engines.model.config import ConfigError, ModelConfig, check_field, show
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_header import check_gguf_header
from inferlab.engines.model.llama import Llama, check_weight_shapes
from inferlab.engines.model.tokenizer import Tokenizer, chat_template_from_jinja

GGUF_MAGIC = b"GGUF"
LLAMA_ARCHITECTURES = ("llama",)

# GGUF tensor name (after "blk.N.") -> Hugging Face name (after "model.layers.N.")
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_CONTROL_TOKEN = 3  # tokenizer.ggml.token_type: 1 normal, 3 control (special), 4 user-defined
_USER_DEFINED_TOKEN = 4
_REQUIRED = object()
# What a metadata value must be, by the Python type GGUFReader gives it.
_KINDS = {int: ("an integer", "integers"), float: ("a number", "numbers"),
          str: ("a string", "strings"), bool: ("a boolean", "booleans"), list: ("an array", "arrays")}


def unpermute_rope_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation.

    The converter stores each head's rows as interleaved pairs (row 2j of the head is HF row
    j, row 2j+1 is HF row j + d_head/2); this puts the two halves back one after the other.
    """
    rows, cols = w.shape
    d_half = rows // n_heads // 2
    return w.reshape(n_heads, d_half, 2, cols).transpose(1, 2).reshape(rows, cols)


def permute_rope_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The converter's permutation itself (HF layout -> GGUF layout); for writing test files."""
    rows, cols = w.shape
    d_half = rows // n_heads // 2
    return w.reshape(n_heads, 2, d_half, cols).transpose(1, 2).reshape(rows, cols)


class GGUFFile:
    """An opened GGUF: its metadata as plain Python values and its tensor records."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        where = str(self.path)
        try:
            with open(self.path, "rb") as f:
                magic = f.read(4)
        except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
            raise ModelLoadError(f"{where}: cannot read: {getattr(e, 'strerror', None) or e}"
                                 ) from None
        if magic != GGUF_MAGIC:
            raise ModelLoadError(f"{where}: not a GGUF file (starts with {magic!r}, "
                                 f"expected {GGUF_MAGIC!r})")
        check_gguf_header(self.path)  # every count bounded before GGUFReader trusts it
        try:
            self.reader = GGUFReader(self.path)
        except Exception as e:  # what the header walk does not check: keys, names, types
            raise ModelLoadError(f"{where}: corrupt GGUF file ({type(e).__name__}: "
                                 f"{show(str(e), 200)})") from None
        self.tensors = {t.name: t for t in self.reader.tensors}

    def get(self, key: str, default: Any = None, kind: type | None = None,
            items: type | None = None) -> Any:
        """A metadata value (str, int, float, bool or list), or `default` if absent.

        With `kind` (int, float, str, bool or list; `items` the type of a list's items) a
        present value of another type is refused; float accepts integers, and bool is never
        an int. A float must be finite.
        """
        field = self.reader.fields.get(key)
        if field is None:
            return default
        try:
            if hasattr(field, "contents"):  # gguf >= 0.11
                value = field.contents()
            else:
                value = _field_value(field)
        except Exception as e:
            raise ModelLoadError(f"{self.path}: unreadable metadata {key!r}: {e}") from None
        if kind is not None and not _is_kind(value, kind):
            raise ModelLoadError(f"{self.path}: metadata {key!r} must be {_KINDS[kind][0]}, got "
                                 f"{show(value)}")
        if items is not None and not all(_is_kind(v, items) for v in value):
            bad = next(v for v in value if not _is_kind(v, items))
            raise ModelLoadError(f"{self.path}: metadata {key!r} must be an array of "
                                 f"{_KINDS[items][1]}, holds {show(bad)}")
        return value

    def require(self, key: str, kind: type | None = None, items: type | None = None) -> Any:
        value = self.get(key, kind=kind, items=items)
        if value is None:
            raise ModelLoadError(f"{self.path}: missing metadata {key!r}")
        return value

    def size(self, field: str, key: str, default: Any = _REQUIRED) -> int | float:
        """Metadata `key` as ModelConfig's `field`, checked against FIELD_LIMITS."""
        value = self.get(key) if default is not _REQUIRED else self.require(key)
        if value is None:
            return default
        try:
            return check_field(field, value, key, label="metadata")
        except ConfigError as e:
            raise ModelLoadError(f"{self.path}: {e}") from None

    @property
    def architecture(self) -> str:
        return self.require("general.architecture", str)

    def tensor(self, name: str) -> torch.Tensor:
        """Tensor `name` dequantized to fp32, in PyTorch's [out, in] orientation."""
        t = self.tensors.get(name)
        if t is None:
            raise ModelLoadError(f"{self.path}: missing tensor {name!r}")
        try:
            with np.errstate(all="ignore"):  # NaN / inf scales: refused after, by the model
                arr = dequantize(t.data, t.tensor_type)
        except Exception as e:
            raise ModelLoadError(f"{self.path}: cannot dequantize tensor {name!r} "
                                 f"({t.tensor_type.name}): {e}") from None
        shape = tensor_shape(t)
        if arr.size != int(np.prod(shape)):
            raise ModelLoadError(f"{self.path}: tensor {name!r} holds {arr.size} values, "
                                 f"its shape {shape} needs {int(np.prod(shape))}")
        arr = np.asarray(arr, dtype=np.float32).reshape(shape)
        return torch.from_numpy(arr if arr.flags.writeable else arr.copy())


def tensor_shape(t) -> tuple[int, ...]:
    """A GGUF tensor record's shape in PyTorch's [out, in] order (GGUF lists ne0 first)."""
    return tuple(int(n) for n in reversed(t.shape))


def _is_kind(value: Any, kind: type) -> bool:
    if kind is float:
        return (isinstance(value, int | float) and not isinstance(value, bool)
                and math.isfinite(value))
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _field_value(field) -> Any:
    """A metadata field's value from its raw parts (for gguf versions without `contents`)."""
    kind = field.types[0]
    if kind == GGUFValueType.ARRAY:
        if field.types[-1] == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [v for i in field.data for v in field.parts[i].tolist()]
    if kind == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def gguf_config(g: GGUFFile, id: str | None = None) -> ModelConfig:
    """A ModelConfig from the `<arch>.*` metadata of a Llama-family GGUF.

    Each size is checked (type, range) under its GGUF key before anything is derived from it;
    the layer count cannot exceed the file's tensors (a layer is several of them).
    """
    arch = g.architecture
    if arch not in LLAMA_ARCHITECTURES:
        raise ModelLoadError(f"{g.path}: architecture {show(arch)} is not supported "
                             f"(Llama-family only: {', '.join(LLAMA_ARCHITECTURES)})")
    scaling = g.get(f"{arch}.rope.scaling.type", kind=str)
    if (scaling not in (None, "none")) or "rope_freqs.weight" in g.tensors:
        raise ModelLoadError(f"{g.path}: RoPE scaling ({show(scaling or 'rope_freqs')}) is not "
                             "supported")
    d_model = g.size("d_model", f"{arch}.embedding_length")
    n_heads = g.size("n_heads", f"{arch}.attention.head_count")
    d_head = g.size("d_head", f"{arch}.attention.key_length", d_model // n_heads)
    rot = g.get(f"{arch}.rope.dimension_count", kind=int)
    if rot is not None and rot != d_head:
        raise ModelLoadError(f"{g.path}: partial RoPE ({rot} of {d_head} dims) is not supported")
    n_layers = g.size("n_layers", f"{arch}.block_count")
    if n_layers > len(g.tensors):
        raise ModelLoadError(f"{g.path}: metadata '{arch}.block_count' is {n_layers:,} but the "
                             f"file holds only {len(g.tensors)} tensors")
    vocab = g.size("vocab_size", f"{arch}.vocab_size", None)
    if vocab is None:
        embd = g.tensors.get("token_embd.weight")
        if embd is None:
            raise ModelLoadError(f"{g.path}: missing tensor 'token_embd.weight'")
        if len(tensor_shape(embd)) != 2:
            raise ModelLoadError(f"{g.path}: tensor 'token_embd.weight' has shape "
                                 f"{tensor_shape(embd)}, expected (vocab_size, d_model)")
        vocab = tensor_shape(embd)[0]
    try:
        return ModelConfig(
            id=id or g.path.stem, name=g.get("general.name", g.path.stem, kind=str),
            n_layers=n_layers, d_model=d_model, n_heads=n_heads,
            n_kv_heads=g.size("n_kv_heads", f"{arch}.attention.head_count_kv", n_heads),
            d_head=d_head,
            d_ff=g.size("d_ff", f"{arch}.feed_forward_length"),
            vocab_size=vocab,
            rope_theta=g.size("rope_theta", f"{arch}.rope.freq_base", 10000.0),
            tie_embeddings="output.weight" not in g.tensors,
            max_position=g.size("max_position", f"{arch}.context_length", 4096),
            source=str(g.path),
            norm_eps=g.size("norm_eps", f"{arch}.attention.layer_norm_rms_epsilon", 1e-5),
        )
    except ConfigError as e:
        raise ModelLoadError(f"{g.path}: bad model metadata: {e}") from None


def gguf_hf_name(g: GGUFFile, name: str) -> str:
    """The Hugging Face name of GGUF tensor `name`; unknown names are refused."""
    hf = _GLOBAL_NAMES.get(name)
    if hf is None:
        m = re.fullmatch(r"blk\.(\d+)\.(.+)", name)
        if m is None or m.group(2) not in _LAYER_NAMES:
            raise ModelLoadError(f"{g.path}: unexpected tensor {show(name, 80)} for a Llama model")
        hf = f"model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}"
    return hf


def check_gguf_shapes(g: GGUFFile, config: ModelConfig) -> None:
    """Every tensor the config needs is in the file with the config's shape (read from the
    tensor records: nothing is dequantized or allocated yet)."""
    shapes = {gguf_hf_name(g, name): tensor_shape(t) for name, t in g.tensors.items()}
    check_weight_shapes(config, shapes, str(g.path))


def gguf_state_dict(g: GGUFFile, config: ModelConfig) -> dict[str, torch.Tensor]:
    """All weights, dequantized to fp32, under Hugging Face names, Q/K rows un-permuted."""
    out: dict[str, torch.Tensor] = {}
    for name in g.tensors:
        hf = gguf_hf_name(g, name)
        w = g.tensor(name)
        if hf.endswith("q_proj.weight"):
            w = unpermute_rope_rows(_check_rows(g, name, w, config.n_heads * config.d_head),
                                    config.n_heads)
        elif hf.endswith("k_proj.weight"):
            w = unpermute_rope_rows(_check_rows(g, name, w, config.n_kv_heads * config.d_head),
                                    config.n_kv_heads)
        out[hf] = w
    return out


def _check_rows(g: GGUFFile, name: str, w: torch.Tensor, rows: int) -> torch.Tensor:
    if w.ndim != 2 or w.shape[0] != rows:
        raise ModelLoadError(f"{g.path}: tensor {name!r} has shape {tuple(w.shape)}, "
                             f"expected {rows} rows")
    return w


def gguf_tokenizer(g: GGUFFile, vocab_size: int | None = None) -> Tokenizer:
    """The byte-level BPE tokenizer in `tokenizer.ggml.*` (llama.cpp's "gpt2" model).

    Token ids it names (EOS, BOS, special tokens) must lie in the vocabulary, and the
    vocabulary must fit the model's `vocab_size` (the embedding's rows) when given.
    """
    kind = g.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ModelLoadError(f"{g.path}: tokenizer model {show(kind)} is not supported "
                             "(byte-level BPE 'gpt2' only)")
    tokens = g.require("tokenizer.ggml.tokens", list, items=str)
    if not tokens:
        raise ModelLoadError(f"{g.path}: metadata 'tokenizer.ggml.tokens' is empty")
    if vocab_size is not None and len(tokens) > vocab_size:
        raise ModelLoadError(f"{g.path}: metadata 'tokenizer.ggml.tokens' holds {len(tokens):,} "
                             f"tokens, more than the model's vocabulary of {vocab_size:,}")
    merges = g.require("tokenizer.ggml.merges", list, items=str)
    types = g.get("tokenizer.ggml.token_type", [], kind=list, items=int)
    if len(types) > len(tokens):
        raise ModelLoadError(f"{g.path}: metadata 'tokenizer.ggml.token_type' has {len(types):,} "
                             f"entries for {len(tokens):,} tokens")
    special = [i for i, t in enumerate(types) if t in (_CONTROL_TOKEN, _USER_DEFINED_TOKEN)]

    def token_id(key: str) -> int | None:
        value = g.get(key, kind=int)
        if value is not None and not 0 <= value < len(tokens):
            raise ModelLoadError(f"{g.path}: metadata {key!r} is {show(value)}, not a token id "
                                 f"(the vocabulary has {len(tokens):,} tokens)")
        return value

    eos_ids = [t for t in (token_id("tokenizer.ggml.eos_token_id"),
                           token_id("tokenizer.ggml.eot_token_id")) if t is not None]
    return Tokenizer.from_bpe(
        tokens, merges, pre=g.get("tokenizer.ggml.pre", "default", kind=str),
        special_ids=special, eos_token_ids=list(dict.fromkeys(eos_ids)),
        bos_token_id=token_id("tokenizer.ggml.bos_token_id"),
        add_bos=g.get("tokenizer.ggml.add_bos_token", False, kind=bool),
        chat_template=chat_template_from_jinja(g.get("tokenizer.chat_template", kind=str)),
        name=g.get("general.name", g.path.stem, kind=str), origin=str(g.path))


def load_gguf(path: str | Path, dtype: str = "fp32", device: str = "cpu",
              id: str | None = None, kernels: str | None = None) -> tuple[Llama, Tokenizer]:
    """(model, tokenizer) from a Llama-family GGUF file, its layers laid out for the kernel
    path `kernels` ("native", "torch"; None or "auto": the process default)."""
    g = GGUFFile(path)
    config = gguf_config(g, id)
    tokenizer = gguf_tokenizer(g, config.vocab_size)
    check_gguf_shapes(g, config)
    model = Llama.from_state_dict(config, gguf_state_dict(g, config), dtype, device,
                                  origin=str(g.path), kernels=kernels)
    return model, tokenizer
