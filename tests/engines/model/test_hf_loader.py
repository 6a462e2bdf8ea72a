"""Hugging Face folders: safetensors round trip, tokenizer.json, and every refusal."""

import json

import pytest
import torch

from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.hf_loader import load_hf_folder
from tests.engines.model.model_files import write_tiny_hf_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_tiny_hf_folder(tmp_path_factory.mktemp("hf") / "tiny-hf")


def test_folder_loads_to_the_same_model(folder, tiny):
    model, tok = load_hf_folder(folder)
    assert model.config.id == "tiny-hf" and not model.config.tie_embeddings
    ids = torch.tensor(tok.encode("safetensors, never pickle"))
    diff = model.forward_nocache(ids, True) - tiny[0].forward_nocache(ids, True)
    assert diff.abs().max() < 1e-6
    assert tok.eos_token_ids == (10,)
    assert tok.apply_chat("hi") == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_only_pickle_weights_are_refused(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "pickled")
    (d / "model.safetensors").unlink()
    (d / "pytorch_model.bin").write_bytes(b"\x80\x04not really")
    with pytest.raises(ModelLoadError, match=r"only pickle checkpoints \(pytorch_model.bin\)"):
        load_hf_folder(d)


def test_no_weights_at_all(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "empty")
    (d / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"no \*.safetensors weight file"):
        load_hf_folder(d)


def test_truncated_safetensors(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "cut")
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="model.safetensors: corrupt or truncated"):
        load_hf_folder(d)


def test_missing_config(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "noconf")
    (d / "config.json").unlink()
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_hf_folder(d)


def test_config_missing_a_field(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "nofield")
    raw = json.loads((d / "config.json").read_text())
    del raw["num_hidden_layers"]
    (d / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ModelLoadError, match="missing field 'num_hidden_layers'"):
        load_hf_folder(d)


def test_config_not_json(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "badjson")
    (d / "config.json").write_text("{nope")
    with pytest.raises(ModelLoadError, match="config.json: not valid JSON"):
        load_hf_folder(d)


@pytest.mark.parametrize("overrides, message", [
    ({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]},
     "architecture 'gpt2' is not supported"),
    ({"model_type": "mamba"}, "model_type 'mamba' is not supported"),
    ({"attention_bias": True}, "missing tensor 'model.layers.0.self_attn.q_proj.bias'"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
     "'original_max_position_embeddings' must be an integer"),
    ({"rope_scaling": {"rope_type": "longrope", "factor": 8.0}}, "RoPE scaling 'longrope'"),
    ({"num_hidden_layers": 3}, "missing tensor 'model.layers.2.input_layernorm.weight'"),
    ({"intermediate_size": 100}, "mlp.gate_proj.weight' has shape"),
])
def test_refusals_name_the_problem(tmp_path, overrides, message):
    d = write_tiny_hf_folder(tmp_path / "bad", **overrides)
    with pytest.raises(ModelLoadError, match=message):
        load_hf_folder(d)


def test_missing_tokenizer(tmp_path):
    d = write_tiny_hf_folder(tmp_path / "notok")
    (d / "tokenizer.json").unlink()
    with pytest.raises(ModelLoadError, match="no tokenizer.json"):
        load_hf_folder(d)


def test_bos_from_the_post_processor(tmp_path):
    """No add_bos_token flag: a tokenizer.json whose post-processor prepends BOS adds it."""
    from tokenizers import processors

    from inferlab.engines.model.tokenizer import Tokenizer, byte_to_unicode

    bos = byte_to_unicode()[1]  # the vocabulary's string for token 1
    d = write_tiny_hf_folder(tmp_path / "bos")
    tok = Tokenizer.byte_level()
    tok.backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, 1)])
    tok.backend.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": bos}))
    _, loaded = load_hf_folder(d)
    assert loaded.bos_token_id == 1 and loaded.encode("hi") == [1, 104, 105]
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": bos,
                                                         "add_bos_token": False}))
    _, loaded = load_hf_folder(d)
    assert loaded.encode("hi") == [104, 105]
