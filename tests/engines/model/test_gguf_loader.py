"""GGUF loading: a tiny Llama GGUF round trip (Q/K un-permuted, Q8_0 dequantized), bad files."""

import shutil

import numpy as np
import pytest
import torch

from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_file import permute_rope_rows, unpermute_rope_rows
from inferlab.engines.model.gguf_loader import load_gguf
from inferlab.engines.model.llama import Llama
from tests.engines.model.model_files import (
    gguf_config,
    quantized_state_dict,
    write_tiny_gguf,
)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def test_permutation_round_trip_and_layout():
    w = torch.arange(2 * 8 * 3, dtype=torch.float32).reshape(16, 3)  # 2 heads of width 8
    p = permute_rope_rows(w, 2)
    # Within each head, GGUF row 2j is HF row j and row 2j+1 is HF row j + 4.
    assert torch.equal(p[0], w[0]) and torch.equal(p[1], w[4]) and torch.equal(p[2], w[1])
    assert torch.equal(p[9], w[12])
    assert torch.equal(unpermute_rope_rows(p, 2), w)


def test_tiny_gguf_loads_to_the_same_model(tiny_gguf):
    model, tok = load_gguf(tiny_gguf)
    cfg = model.config
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_ff,
            cfg.vocab_size, cfg.tie_embeddings, cfg.max_position) == (
        2, 64, 4, 2, 16, 128, 258, True, 2048)
    assert cfg.name == "tiny-gguf" and cfg.id == "tiny"
    assert cfg.norm_eps == pytest.approx(1e-5)
    ref = Llama.from_state_dict(gguf_config(), quantized_state_dict(gguf_config()))
    ids = torch.tensor([104, 101, 256, 108, 111, 257, 3])
    diff = model.forward_nocache(ids, True) - ref.forward_nocache(ids, True)
    assert diff.abs().max() < 1e-5


def test_tiny_gguf_tokenizer(tiny_gguf):
    _, tok = load_gguf(tiny_gguf)
    assert tok.encode("hello<|end|>") == [256, 108, 108, 111, 257]  # "he" merged, special
    assert tok.decode([256, 108, 108, 111, 257]) == "hello"
    assert tok.decode([256, 257], skip_special=False) == "he<|end|>"
    assert tok.eos_token_ids == (257,)
    assert tok.chat_template is not None and tok.chat_template.kind == "chatml"
    assert tok.encode("é") == list("é".encode())


def test_bf16_load(tiny_gguf):
    model, _ = load_gguf(tiny_gguf, dtype="bf16")
    assert model.dtype == torch.bfloat16


def test_garbage_file(tmp_path):
    path = tmp_path / "junk.gguf"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ModelLoadError, match="junk.gguf: not a GGUF file"):
        load_gguf(path)


def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match="cannot read"):
        load_gguf(tmp_path / "absent.gguf")


@pytest.mark.parametrize("n_bytes", [4, 24, 3000, 100_000, 223_000])
def test_truncated_tiny_gguf(tiny_gguf, tmp_path, n_bytes):
    path = tmp_path / "cut.gguf"
    path.write_bytes(tiny_gguf.read_bytes()[:n_bytes])
    with pytest.raises(ModelLoadError, match="cut.gguf: .*(truncated|corrupt|not a GGUF)"):
        load_gguf(path)


@pytest.mark.parametrize("n_bytes", [1_000, 600_000])  # in the header, in the vocabulary
def test_truncated_smollm2(smollm2_path, tmp_path, n_bytes):
    path = tmp_path / "smol-cut.gguf"
    with open(smollm2_path, "rb") as src, open(path, "wb") as dst:
        dst.write(src.read(n_bytes))
    with pytest.raises(ModelLoadError, match="smol-cut.gguf: .*truncated"):
        load_gguf(path)


def test_non_llama_architecture(tmp_path):
    path = write_tiny_gguf(tmp_path / "gpt2.gguf", arch="gpt2")
    with pytest.raises(ModelLoadError, match="architecture 'gpt2' is not supported"):
        load_gguf(path)


def test_missing_metadata(tmp_path):
    path = write_tiny_gguf(tmp_path / "nometa.gguf", skip=("block_count",))
    with pytest.raises(ModelLoadError, match="missing metadata 'llama.block_count'"):
        load_gguf(path)


def test_missing_tensor(tmp_path):
    path = write_tiny_gguf(tmp_path / "notensor.gguf", skip=("blk.1.ffn_up.weight",))
    with pytest.raises(ModelLoadError, match="model.layers.1.mlp.up_proj.weight"):
        load_gguf(path)


def test_a_copy_with_another_name_keeps_its_stem_as_id(tiny_gguf, tmp_path):
    path = tmp_path / "other-name.gguf"
    shutil.copy(tiny_gguf, path)
    model, _ = load_gguf(path)
    assert model.config.id == "other-name"


def test_metadata_without_the_contents_helper(tiny_gguf):
    """Older gguf packages have no ReaderField.contents(): the raw parts give the same values."""
    from inferlab.engines.model.gguf_file import GGUFFile, _field_value

    g = GGUFFile(tiny_gguf)
    for key in ("general.architecture", "llama.block_count", "llama.rope.freq_base",
                "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"):
        assert _field_value(g.reader.fields[key]) == g.get(key), key
