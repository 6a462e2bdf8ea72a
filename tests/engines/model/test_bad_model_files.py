"""Bad model files, one named test per kind: each ends in the reader's own error naming the
file and the field, never a ZeroDivisionError, a NaN in the model, a hang or a huge
allocation (the fuzz tests in test_fuzz_readers.py try thousands more)."""

from __future__ import annotations

import json
import math
import struct

import pytest
import torch

from inferlab.engines.model.config import ConfigError, ModelConfig
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_loader import load_gguf
from inferlab.engines.model.hf_config import load_hf_config
from inferlab.engines.model.hf_loader import load_hf_folder
from tests.engines.model.model_files import write_tiny_hf_folder
from tests.engines.model.small_gguf import FUZZ_CONFIG, put, write_fuzz_gguf


def gguf_with(tmp_path, key: str, value, kind: str):
    from gguf import GGUFValueType

    return write_fuzz_gguf(tmp_path / "bad.gguf", {key: (value, GGUFValueType[kind])})


def refused(path, *fragments: str) -> str:
    with pytest.raises(ModelLoadError) as info:
        load_gguf(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    for fragment in fragments:
        assert fragment in message, message
    return message


# ---- GGUF ------------------------------------------------------------------------------------

def test_zero_attention_heads(tmp_path):
    path = gguf_with(tmp_path, "llama.attention.head_count", 0, "UINT32")
    refused(path, "metadata 'llama.attention.head_count' must be an integer in [1, 4,096], "
                  "got 0")


def test_nan_rope_base(tmp_path):
    path = gguf_with(tmp_path, "llama.rope.freq_base", math.nan, "FLOAT32")
    refused(path, "'llama.rope.freq_base'", "got nan")


def test_absurd_block_count(tmp_path):
    path = gguf_with(tmp_path, "llama.block_count", 2**31, "UINT32")
    refused(path, "metadata 'llama.block_count' must be an integer in [1, 4,096], got 2147483648")


def test_block_count_past_the_files_tensors(tmp_path):
    path = gguf_with(tmp_path, "llama.block_count", 4000, "UINT32")
    refused(path, "'llama.block_count' is 4,000 but the file holds only 11 tensors")


def test_head_count_of_the_wrong_type(tmp_path):
    path = gguf_with(tmp_path, "llama.attention.head_count", "two", "STRING")
    refused(path, "metadata 'llama.attention.head_count' must be an integer in", "'two'")


def test_array_length_past_the_end_of_the_file(tmp_path):
    from gguf import GGUFReader

    path = write_fuzz_gguf(tmp_path / "long-array.gguf")
    field = GGUFReader(path).fields["tokenizer.ggml.tokens"]
    count_at = field.offset + 8 + len(field.name) + 4 + 4  # key, value type, item type
    path.write_bytes(put(path.read_bytes(), count_at, "Q", 2**62))
    refused(path, "truncated or corrupt GGUF header: metadata 'tokenizer.ggml.tokens'",
            "array length is 4,611,686,018,427,387,904")


def test_tensor_bigger_than_the_file(tmp_path):
    from gguf import GGUFReader

    path = write_fuzz_gguf(tmp_path / "big-tensor.gguf")
    t = next(t for t in GGUFReader(path).tensors if t.name == "token_embd.weight")
    first_dim_at = t.field.offset + 8 + len(t.name) + 4
    path.write_bytes(put(path.read_bytes(), first_dim_at, "Q", 2**40))
    refused(path, "truncated: tensor 'token_embd.weight' ends at byte")


def test_a_huge_context_allocates_nothing_up_front(tmp_path):
    """context_length 2^28 is in range: the model loads, its RoPE tables stay small."""
    path = gguf_with(tmp_path, "llama.context_length", 2**28, "UINT32")
    model, _ = load_gguf(path)
    assert model.config.max_position == 2**28
    assert model.rope.cos.numel() <= model.rope.INITIAL_VALUES
    logits = model.forward_nocache(torch.tensor([1, 2, 3]))
    assert bool(torch.isfinite(logits).all())


def test_nan_weights_are_refused(tmp_path):
    from gguf import GGUFReader

    path = write_fuzz_gguf(tmp_path / "nan-weight.gguf")
    t = next(t for t in GGUFReader(path).tensors if t.name == "output_norm.weight")
    path.write_bytes(put(path.read_bytes(), t.data_offset, "f", math.nan))
    refused(path, "tensor 'model.norm.weight' holds NaN or infinite values")


def test_config_shapes_are_checked_before_any_tensor_is_read(tmp_path):
    path = gguf_with(tmp_path, "llama.feed_forward_length", 2**20, "UINT32")
    refused(path, "tensor 'blk.0.ffn_gate.weight' has shape (64, 32), the config needs "
                  f"({2**20}, {FUZZ_CONFIG.d_model})")


# ---- Hugging Face folders --------------------------------------------------------------------

@pytest.mark.parametrize("ids", ["2", [2, "10"], 1.5, [10**30], True, {"id": 2}, -1, 256])
def test_wrongly_typed_generation_config_ids(tmp_path, ids):
    d = write_tiny_hf_folder(tmp_path / "gen")
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": ids}))
    with pytest.raises(ModelLoadError) as info:
        load_hf_folder(d)
    message = str(info.value)
    assert message.startswith(str(d / "generation_config.json"))
    assert "field 'eos_token_id' must be a token id (an integer in [0, 256))" in message


def test_generation_config_ids_are_read(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "gen-ok")
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [10, 2]}))
    _, tok = load_hf_folder(d)
    assert tok.eos_token_ids == (10, 2)


@pytest.mark.parametrize("field, value, expected", [
    ("hidden_size", 1e30, "field 'hidden_size' must be an integer in [1, 262,144], got 1e+30"),
    ("num_attention_heads", 0, "field 'num_attention_heads' must be an integer"),
    ("rope_theta", "1e4", "field 'rope_theta' must be a finite number in [1, 1e+18]"),
    ("rms_norm_eps", -1e-5, "field 'rms_norm_eps' must be a finite number in (0, 1]"),
    ("max_position_embeddings", 2**40, "field 'max_position_embeddings' must be an integer"),
    ("tie_word_embeddings", "no", "field 'tie_word_embeddings' must be true or false"),
])
def test_hf_config_values_name_file_and_field(tmp_path, field, value, expected):
    d = write_tiny_hf_folder(tmp_path / "cfg", **{field: value})
    with pytest.raises(ModelLoadError) as info:
        load_hf_folder(d)
    assert str(info.value).startswith(str(d / "config.json")) and expected in str(info.value)


def test_hf_config_with_nan_literal(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "nan")
    text = (d / "config.json").read_text().replace('"rope_theta": 10000.0', '"rope_theta": NaN')
    (d / "config.json").write_text(text)
    with pytest.raises(ModelLoadError, match="field 'rope_theta' must be a finite number"):
        load_hf_folder(d)


def test_safetensors_shapes_checked_against_the_config_before_reading(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "st")
    blob = (d / "model.safetensors").read_bytes()
    (n,) = struct.unpack_from("<Q", blob)
    header = json.loads(blob[8:8 + n])
    name = "model.layers.0.mlp.up_proj.weight"
    header[name]["shape"] = header[name]["shape"][::-1]  # same bytes, transposed
    text = json.dumps(header).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + blob[8 + n:])
    with pytest.raises(ModelLoadError, match=f"tensor '{name}' has shape \\(64, 128\\), "
                                             "expected \\(128, 64\\)"):
        load_hf_folder(d)


# ---- config.json (kv-calc) and ModelConfig ---------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ('{"hidden_size": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested too deeply"),
    ('{"hidden_size": 1' + "0" * 5000 + "}", "not valid JSON"),
    (b'{"hidden_size": "\xff"}', "not UTF-8"),
])
def test_unreadable_config_json(tmp_path, text, expected):
    path = tmp_path / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=expected) as info:
        load_hf_config(path)
    assert str(info.value).startswith(str(path))


@pytest.mark.parametrize("field, value", [("d_model", 10**30), ("rope_theta", math.inf),
                                          ("norm_eps", math.nan), ("n_layers", 2**13),
                                          ("rope_theta", 10**400)])
def test_model_config_refuses_absurd_values(field, value):
    from inferlab.engines.model.tiny import tiny_config

    fields = tiny_config().to_dict() | {field: value}
    with pytest.raises(ConfigError, match=f"preset.json: field '{field}' must be"):
        ModelConfig.from_dict(fields, "preset.json")
