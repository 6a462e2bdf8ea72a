"""load_model: names, paths, devices, dtypes."""

import pytest
import torch

from inferlab.engines.model.registry import MODEL_NAMES, load_model, resolve_device
from tests.engines.model.model_files import write_tiny_gguf, write_tiny_hf_folder


def test_names():
    assert MODEL_NAMES == ("smollm2-135m", "gemma3-270m", "tiny", "tiny-moe")


def test_tiny_by_name():
    model, tok = load_model("tiny", dtype="bf16")
    assert model.config.id == "tiny" and model.dtype == torch.bfloat16
    assert tok.encode("ab") == [97, 98]


def test_paths(tmp_path):
    gguf_model, _ = load_model(str(write_tiny_gguf(tmp_path / "t.gguf")))
    hf_model, _ = load_model(str(write_tiny_hf_folder(tmp_path / "hf")))
    assert gguf_model.config.vocab_size == 258 and hf_model.config.vocab_size == 256


@pytest.mark.parametrize("spec", ["llama-9000", "/no/such/model.gguf", ""])
def test_unknown_spec(spec):
    with pytest.raises(ValueError, match="unknown model .*expected smollm2-135m, gemma3-270m, tiny, tiny-moe"):
        load_model(spec)


def test_not_a_model_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(ValueError, match="not a GGUF file"):
        load_model(str(path))


@pytest.mark.parametrize("device, message", [
    ("tpu", "unknown device 'tpu'"),
    ("cuda:7", "'cuda:7' is not available"),
])
def test_bad_device(device, message):
    with pytest.raises(ValueError, match=message):
        resolve_device(device)
    with pytest.raises(ValueError, match=message):
        load_model("tiny", device=device)


def test_bad_dtype():
    with pytest.raises(ValueError, match="unknown dtype 'fp8'"):
        load_model("tiny", dtype="fp8")
