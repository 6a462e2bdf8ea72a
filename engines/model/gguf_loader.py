"""Load a Llama-family GGUF file (llama.cpp's format): config, weights and tokenizer.

Every tensor is dequantized to fp32 with `gguf.quants.dequantize` (F32, F16, BF16, Q8_0,
Q4_0, Q4_1, K-quants, ...), renamed to Hugging Face's Llama names and cast to the requested
dtype. llama.cpp's converter permutes the rows of W_q and W_k so that its RoPE can rotate
adjacent pairs (x0, x1), (x2, x3), ...; we undo that permutation so the weights fit the
"rotate half" RoPE of `rope.py` and give the same logits as Hugging Face's model.

Any problem (not a GGUF, truncated, a tensor missing or of the wrong shape, an architecture
that is not Llama) raises `ModelLoadError` naming the file and what is wrong.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from inferlab.engines.model.config import ConfigError, ModelConfig
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.llama import Llama
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
        except OSError as e:
            raise ModelLoadError(f"{where}: cannot read: {e.strerror or e}") from None
        if magic != GGUF_MAGIC:
            raise ModelLoadError(f"{where}: not a GGUF file (starts with {magic!r}, "
                                 f"expected {GGUF_MAGIC!r})")
        from gguf import GGUFReader

        size = os.path.getsize(self.path)
        try:
            self.reader = GGUFReader(self.path)
        except Exception as e:  # numpy errors from a cut header or cut tensor data
            raise ModelLoadError(f"{where}: corrupt or truncated GGUF file ({size} bytes; "
                                 f"{type(e).__name__}: {e})") from None
        self.tensors = {}
        for t in self.reader.tensors:
            end = int(t.data_offset) + int(t.n_bytes)
            if end > size:
                raise ModelLoadError(f"{where}: truncated: tensor {t.name!r} ends at byte {end} "
                                     f"but the file has {size} bytes")
            self.tensors[t.name] = t

    def get(self, key: str, default: Any = None) -> Any:
        """A metadata value (str, int, float, bool or list), or `default` if absent."""
        field = self.reader.fields.get(key)
        if field is None:
            return default
        try:
            if hasattr(field, "contents"):  # gguf >= 0.11
                return field.contents()
            return _field_value(field)
        except Exception as e:
            raise ModelLoadError(f"{self.path}: unreadable metadata {key!r}: {e}") from None

    def require(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            raise ModelLoadError(f"{self.path}: missing metadata {key!r}")
        return value

    @property
    def architecture(self) -> str:
        return str(self.require("general.architecture"))

    def tensor(self, name: str) -> torch.Tensor:
        """Tensor `name` dequantized to fp32, in PyTorch's [out, in] orientation."""
        from gguf.quants import dequantize

        t = self.tensors.get(name)
        if t is None:
            raise ModelLoadError(f"{self.path}: missing tensor {name!r}")
        try:
            arr = dequantize(t.data, t.tensor_type)
        except Exception as e:
            raise ModelLoadError(f"{self.path}: cannot dequantize tensor {name!r} "
                                 f"({t.tensor_type.name}): {e}") from None
        shape = tuple(int(n) for n in reversed(t.shape))
        if arr.size != int(np.prod(shape)):
            raise ModelLoadError(f"{self.path}: tensor {name!r} holds {arr.size} values, "
                                 f"its shape {shape} needs {int(np.prod(shape))}")
        arr = np.asarray(arr, dtype=np.float32).reshape(shape)
        return torch.from_numpy(arr if arr.flags.writeable else arr.copy())


def _field_value(field) -> Any:
    """A metadata field's value from its raw parts (for gguf versions without `contents`)."""
    from gguf import GGUFValueType

    kind = field.types[0]
    if kind == GGUFValueType.ARRAY:
        if field.types[-1] == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [v for i in field.data for v in field.parts[i].tolist()]
    if kind == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def gguf_config(g: GGUFFile, id: str | None = None) -> ModelConfig:
    """A ModelConfig from the `<arch>.*` metadata of a Llama-family GGUF."""
    arch = g.architecture
    if arch not in LLAMA_ARCHITECTURES:
        raise ModelLoadError(f"{g.path}: architecture {arch!r} is not supported "
                             f"(Llama-family only: {', '.join(LLAMA_ARCHITECTURES)})")
    scaling = g.get(f"{arch}.rope.scaling.type")
    if (scaling not in (None, "none")) or "rope_freqs.weight" in g.tensors:
        raise ModelLoadError(f"{g.path}: RoPE scaling ({scaling or 'rope_freqs'}) is not "
                             "supported")
    d_model = int(g.require(f"{arch}.embedding_length"))
    n_heads = int(g.require(f"{arch}.attention.head_count"))
    d_head = int(g.get(f"{arch}.attention.key_length", d_model // n_heads))
    rot = g.get(f"{arch}.rope.dimension_count")
    if rot is not None and int(rot) != d_head:
        raise ModelLoadError(f"{g.path}: partial RoPE ({rot} of {d_head} dims) is not supported")
    vocab = g.get(f"{arch}.vocab_size")
    if vocab is None:
        embd = g.tensors.get("token_embd.weight")
        if embd is None:
            raise ModelLoadError(f"{g.path}: missing tensor 'token_embd.weight'")
        vocab = int(embd.shape[-1])
    name = str(g.get("general.name", g.path.stem))
    try:
        return ModelConfig(
            id=id or g.path.stem, name=name,
            n_layers=int(g.require(f"{arch}.block_count")),
            d_model=d_model, n_heads=n_heads,
            n_kv_heads=int(g.get(f"{arch}.attention.head_count_kv", n_heads)),
            d_head=d_head,
            d_ff=int(g.require(f"{arch}.feed_forward_length")),
            vocab_size=int(vocab),
            rope_theta=float(g.get(f"{arch}.rope.freq_base", 10000.0)),
            tie_embeddings="output.weight" not in g.tensors,
            max_position=int(g.get(f"{arch}.context_length", 4096)),
            source=str(g.path),
            norm_eps=float(g.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
        )
    except (ConfigError, TypeError, ValueError) as e:
        raise ModelLoadError(f"{g.path}: bad model metadata: {e}") from None


def gguf_state_dict(g: GGUFFile, config: ModelConfig) -> dict[str, torch.Tensor]:
    """All weights, dequantized to fp32, under Hugging Face names, Q/K rows un-permuted."""
    out: dict[str, torch.Tensor] = {}
    for name in g.tensors:
        hf = _GLOBAL_NAMES.get(name)
        if hf is None:
            m = re.fullmatch(r"blk\.(\d+)\.(.+)", name)
            if m is None or m.group(2) not in _LAYER_NAMES:
                raise ModelLoadError(f"{g.path}: unexpected tensor {name!r} for a Llama model")
            hf = f"model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}"
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


def gguf_tokenizer(g: GGUFFile) -> Tokenizer:
    """The byte-level BPE tokenizer in `tokenizer.ggml.*` (llama.cpp's "gpt2" model)."""
    kind = g.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ModelLoadError(f"{g.path}: tokenizer model {kind!r} is not supported "
                             "(byte-level BPE 'gpt2' only)")
    tokens = list(g.require("tokenizer.ggml.tokens"))
    merges = list(g.require("tokenizer.ggml.merges"))
    types = list(g.get("tokenizer.ggml.token_type", []))
    special = [i for i, t in enumerate(types) if t in (_CONTROL_TOKEN, _USER_DEFINED_TOKEN)]
    eos = g.get("tokenizer.ggml.eos_token_id")
    eot = g.get("tokenizer.ggml.eot_token_id")
    eos_ids = [int(x) for x in (eos, eot) if x is not None]
    bos = g.get("tokenizer.ggml.bos_token_id")
    return Tokenizer.from_bpe(
        tokens, merges, pre=str(g.get("tokenizer.ggml.pre", "default")), special_ids=special,
        eos_token_ids=list(dict.fromkeys(eos_ids)),
        bos_token_id=None if bos is None else int(bos),
        add_bos=bool(g.get("tokenizer.ggml.add_bos_token", False)),
        chat_template=chat_template_from_jinja(g.get("tokenizer.chat_template")),
        name=str(g.get("general.name", g.path.stem)), origin=str(g.path))


def load_gguf(path: str | Path, dtype: str = "fp32", device: str = "cpu",
              id: str | None = None) -> tuple[Llama, Tokenizer]:
    """(model, tokenizer) from a Llama-family GGUF file."""
    g = GGUFFile(path)
    config = gguf_config(g, id)
    tokenizer = gguf_tokenizer(g)
    model = Llama.from_state_dict(config, gguf_state_dict(g, config), dtype, device,
                                  origin=str(g.path))
    return model, tokenizer
