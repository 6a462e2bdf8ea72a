"""Load a Hugging Face model folder of any family the decoder runs: `config.json`, `*.safetensors`, `tokenizer.json`.

Weights are read only from safetensors files (plain tensors, no code). Pickle-based
checkpoints (`pytorch_model.bin`, `*.pt`, ...) can run arbitrary code when loaded, so a folder
holding only those is refused with a message saying to convert it.

Nothing in the folder is trusted before it is checked: config.json's sizes by
`config.check_field`, token ids by their type and the vocabulary, and the safetensors
headers' tensor shapes against the config before any tensor is read.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from inferlab.engines.model.config import (
    ConfigError,
    ModelConfig,
    read_json_file,
    show,
)
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.hf_config import model_config_from_hf
from inferlab.engines.model.llama import Llama, check_runs, check_weight_shapes
from inferlab.engines.model.tokenizer import Tokenizer

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def read_json_object(path: Path) -> dict:
    """A JSON file holding an object; ModelLoadError naming the file otherwise."""
    data = read_json_file(path, ModelLoadError)
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path}: expected a JSON object")
    return data


def hf_config(folder: Path) -> tuple[ModelConfig, dict]:
    """(ModelConfig, raw config.json) of a model folder; a family the decoder does not run is
    refused by name."""
    path = folder / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{folder}: no config.json (not a Hugging Face model folder)")
    raw = read_json_object(path)
    try:
        config = model_config_from_hf(raw, id=folder.name or "hf-model", source=str(path))
    except ConfigError as e:
        raise ModelLoadError(str(e)) from None
    check_runs(config, str(path))
    return config, raw


def hf_state_dict(folder: Path, config: ModelConfig | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors files (one file or shards).

    With `config`, the tensors' shapes (read from the files' headers) are checked against
    it before any tensor is read.
    """
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise ModelLoadError(
                f"{folder}: only pickle checkpoints ({', '.join(pickles)}); InferLab never loads "
                "pickle files (they can run code). Convert the weights to safetensors first.")
        raise ModelLoadError(f"{folder}: no *.safetensors weight file")
    bad = (SafetensorError, OSError, ValueError, RuntimeError, TypeError, OverflowError)
    if config is not None:
        shapes: dict[str, tuple[int, ...]] = {}
        for f in files:
            try:
                with safe_open(str(f), "pt") as st:
                    for key in st.keys():
                        shapes[key] = tuple(st.get_slice(key).get_shape())
            except bad as e:
                raise ModelLoadError(f"{f}: corrupt or truncated safetensors file: {e}") from None
        check_weight_shapes(config, shapes, str(folder))
    out: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            out |= load_file(str(f))
        except bad as e:
            raise ModelLoadError(f"{f}: corrupt or truncated safetensors file: {e}") from None
    return out


def _eos_ids(folder: Path, raw: dict, vocab_size: int) -> list[int]:
    """EOS ids from generation_config.json (else config.json): an id or a list of ids, each
    an integer in [0, vocab_size)."""
    path, ids = folder / "config.json", raw.get("eos_token_id")
    gen = folder / "generation_config.json"
    if gen.is_file():
        gen_raw = read_json_object(gen)
        if gen_raw.get("eos_token_id") is not None:
            path, ids = gen, gen_raw["eos_token_id"]
    if ids is None:
        return []
    for i in ids if isinstance(ids, list) else [ids]:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < vocab_size:
            raise ModelLoadError(f"{path}: field 'eos_token_id' must be a token id (an integer "
                                 f"in [0, {vocab_size:,})) or a list of them, got {show(ids)}")
    return list(ids) if isinstance(ids, list) else [ids]


def load_hf_folder(folder: str | Path, dtype: str = "fp32", device: str = "cpu",
                   kernels: str | None = None) -> tuple[Llama, Tokenizer]:
    """(model, tokenizer) from a Hugging Face Llama folder, on the kernel path `kernels` (as
    `load_gguf`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelLoadError(f"{folder}: not a folder")
    config, raw = hf_config(folder)
    eos_ids = _eos_ids(folder, raw, config.vocab_size)
    weights = hf_state_dict(folder, config)
    if not (folder / "tokenizer.json").is_file():
        raise ModelLoadError(f"{folder}: no tokenizer.json")
    tokenizer = Tokenizer.from_hf_folder(folder, eos_ids)
    model = Llama.from_state_dict(config, weights, dtype, device, origin=str(folder),
                                  kernels=kernels)
    return model, tokenizer
