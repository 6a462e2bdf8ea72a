"""A small valid Llama GGUF written on the fly, any metadata entry replaceable.

1 layer, d_model 32, 2 query heads sharing 1 K/V head of width 16, SwiGLU d_ff 64 (Q8_0),
a 32-token vocabulary, tied embeddings: about 30 KB, so a fuzz case loads in milliseconds.
"""

from __future__ import annotations

import struct
from pathlib import Path

from inferlab.engines.model.tiny import tiny_config, tiny_state_dict
from inferlab.engines.model.tokenizer import byte_to_unicode
from tests.engines.model.model_files import add_llama_tensors

FUZZ_CONFIG = tiny_config(n_layers=1, d_model=32, n_heads=2, n_kv_heads=1, d_head=16, d_ff=64,
                          vocab_size=32, tie_embeddings=True, max_position=64)
_BYTES = byte_to_unicode()
TOKENS = [_BYTES[b] for b in range(ord("a"), ord("a") + 30)] + ["ab", "<|end|>"]


def gguf_metadata() -> dict:
    """key -> (value, GGUFValueType[, item type]) of the fuzz GGUF, architecture aside."""
    from gguf import GGUFValueType as V

    c = FUZZ_CONFIG
    return {
        "general.name": ("fuzz", V.STRING),
        "llama.block_count": (c.n_layers, V.UINT32),
        "llama.context_length": (c.max_position, V.UINT32),
        "llama.embedding_length": (c.d_model, V.UINT32),
        "llama.feed_forward_length": (c.d_ff, V.UINT32),
        "llama.attention.head_count": (c.n_heads, V.UINT32),
        "llama.attention.head_count_kv": (c.n_kv_heads, V.UINT32),
        "llama.attention.key_length": (c.d_head, V.UINT32),
        "llama.rope.dimension_count": (c.d_head, V.UINT32),
        "llama.rope.freq_base": (c.rope_theta, V.FLOAT32),
        "llama.attention.layer_norm_rms_epsilon": (c.norm_eps, V.FLOAT32),
        "llama.vocab_size": (c.vocab_size, V.UINT32),
        "tokenizer.ggml.model": ("gpt2", V.STRING),
        "tokenizer.ggml.pre": ("default", V.STRING),
        "tokenizer.ggml.tokens": (TOKENS, V.ARRAY, V.STRING),
        "tokenizer.ggml.token_type": ([1] * 31 + [3], V.ARRAY, V.INT32),
        "tokenizer.ggml.merges": (["a b"], V.ARRAY, V.STRING),
        "tokenizer.ggml.eos_token_id": (31, V.UINT32),
        "tokenizer.ggml.bos_token_id": (0, V.UINT32),
        "tokenizer.ggml.add_bos_token": (False, V.BOOL),
        "tokenizer.chat_template": ("<|im_start|>{{m}}<|im_end|>", V.STRING),
    }


def write_fuzz_gguf(path: Path, overrides: dict | None = None) -> Path:
    """The fuzz GGUF (1 layer, d_model 32, vocab 32, tied; Q8_0 MLP); `overrides` replace
    metadata entries: key -> (value, type[, item type]), or None to leave the key out."""
    import gguf

    c = FUZZ_CONFIG
    w = gguf.GGUFWriter(str(path), "llama")
    for key, entry in (gguf_metadata() | (overrides or {})).items():
        if entry is not None:
            value, vtype, *sub = entry
            w.add_key_value(key, value, vtype, sub[0] if sub else None)
    add_llama_tensors(w, c, tiny_state_dict(c))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def put(data: bytes, offset: int, fmt: str, value: int | float) -> bytes:
    """`data` with the little-endian struct `fmt` value at `offset` replaced."""
    out = bytearray(data)
    struct.pack_into("<" + fmt, out, offset, value)
    return bytes(out)
