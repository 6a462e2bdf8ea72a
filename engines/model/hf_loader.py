"""Load a Hugging Face Llama folder: `config.json`, `*.safetensors`, `tokenizer.json`.

Weights are read only from safetensors files (plain tensors, no code). Pickle-based
checkpoints (`pytorch_model.bin`, `*.pt`, ...) can run arbitrary code when loaded, so a folder
holding only those is refused with a message saying to convert it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from inferlab.engines.model.config import ConfigError, ModelConfig, model_config_from_hf
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.llama import Llama
from inferlab.engines.model.tokenizer import Tokenizer

LLAMA_MODEL_TYPES = ("llama",)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise ModelLoadError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path}: expected a JSON object")
    return data


def hf_config(folder: Path) -> tuple[ModelConfig, dict]:
    """(ModelConfig, raw config.json) of a Llama folder; other architectures are refused."""
    path = folder / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{folder}: no config.json (not a Hugging Face model folder)")
    raw = _read_json(path)
    model_type = raw.get("model_type")
    if model_type not in LLAMA_MODEL_TYPES:
        arch = raw.get("architectures") or [model_type]
        raise ModelLoadError(f"{path}: architecture {arch[0]!r} (model_type {model_type!r}) is "
                             f"not supported (Llama-family only: {', '.join(LLAMA_MODEL_TYPES)})")
    for flag in ("attention_bias", "mlp_bias"):
        if raw.get(flag):
            raise ModelLoadError(f"{path}: {flag} is true; biases are not supported")
    scaling = raw.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else None
    if kind not in (None, "default"):
        raise ModelLoadError(f"{path}: RoPE scaling {kind!r} is not supported")
    try:
        return model_config_from_hf(raw, id=folder.name or "hf-model", source=str(path)), raw
    except ConfigError as e:
        raise ModelLoadError(str(e)) from None


def hf_state_dict(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors files (one file or shards)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise ModelLoadError(
                f"{folder}: only pickle checkpoints ({', '.join(pickles)}); InferLab never loads "
                "pickle files (they can run code). Convert the weights to safetensors first.")
        raise ModelLoadError(f"{folder}: no *.safetensors weight file")
    out: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            out |= load_file(str(f))
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise ModelLoadError(f"{f}: corrupt or truncated safetensors file: {e}") from None
    return out


def _eos_ids(folder: Path, raw: dict) -> list[int]:
    ids = raw.get("eos_token_id")
    gen = folder / "generation_config.json"
    if gen.is_file():
        ids = _read_json(gen).get("eos_token_id", ids)
    if ids is None:
        return []
    return [int(i) for i in (ids if isinstance(ids, list) else [ids])]


def load_hf_folder(folder: str | Path, dtype: str = "fp32", device: str = "cpu"
                   ) -> tuple[Llama, Tokenizer]:
    """(model, tokenizer) from a Hugging Face Llama folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelLoadError(f"{folder}: not a folder")
    config, raw = hf_config(folder)
    weights = hf_state_dict(folder)
    if not (folder / "tokenizer.json").is_file():
        raise ModelLoadError(f"{folder}: no tokenizer.json")
    tokenizer = Tokenizer.from_hf_folder(folder, _eos_ids(folder, raw))
    model = Llama.from_state_dict(config, weights, dtype, device, origin=str(folder))
    return model, tokenizer
