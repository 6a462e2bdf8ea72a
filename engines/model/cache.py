"""The app-wide model cache: every lab's model by name, SmolLM2-135M when it is installed
(`auto`), the seeded tiny model otherwise.

`load_lab_model` keeps what it loaded, so resetting a scenario, switching between them or
between labs does not read the GGUF again. `model_description` is a loaded model's own
description (`model.config`), for the labs that only compute from it (roofline, memory):
`described` finds a model by id among the presets (assets/models) and then the registry's
models, `description_choices` lists them.
"""

from __future__ import annotations

import threading

from inferlab.engines.kernels import resolve
from inferlab.engines.model.config import ModelConfig, list_model_presets, load_model_preset
from inferlab.engines.model.gemma_file import GEMMA3_ID, gemma3_gguf_path
from inferlab.engines.model.linear_costs import linear_paths
from inferlab.engines.model.registry import MODEL_NAMES, SMOLLM2_ID, load_model, smollm2_gguf_path

AUTO = "auto"
"""SmolLM2 when installed, else tiny."""

_cache: dict[tuple[str, str, str, str, str], tuple] = {}
_lock = threading.Lock()


def smollm2_available() -> bool:
    try:
        smollm2_gguf_path()
    except ValueError:
        return False
    return True


def gemma3_available() -> bool:
    """Whether Gemma 3 270M's package is installed (its file is assembled at first use)."""
    try:
        gemma3_gguf_path()
    except ValueError:
        return False
    return True


def resolve_model_name(spec: str) -> str:
    """`auto` becomes smollm2-135m or tiny; anything else is returned as it is."""
    if spec == AUTO:
        return SMOLLM2_ID if smollm2_available() else "tiny"
    return spec


def model_choices() -> list[tuple[str, str]]:
    """(spec, label) for a model menu: every registry name, installed or not (the label says)."""
    out = []
    for name in MODEL_NAMES:
        if name == SMOLLM2_ID:
            label = "SmolLM2-135M-Instruct (real)" if smollm2_available() else \
                "SmolLM2-135M (not installed)"
        elif name == GEMMA3_ID:
            label = "Gemma 3 270M (real, base, Q4_K_M)" if gemma3_available() else \
                "Gemma 3 270M (not installed)"
        elif name == "tiny":
            label = "tiny (random weights, fast)"
        elif name == "tiny-moe":
            label = "tiny MoE (random weights, 8 experts, top-2)"
        else:
            label = name
        out.append((name, label))
    return out


def load_lab_model(spec: str, device: str = "cpu", dtype: str = "fp32",
                   kernels: str | None = "auto", weights: str = "auto"):
    """(model, tokenizer) for `spec` (auto, a registry name or a path) on the kernel path
    `kernels` (a lab's `kernels` setting: "auto" is the process default), a GGUF's weights held
    as `weights` says ("auto", "fp32", "codes": `registry.load_model`), cached per path and
    holding too: a model's layers keep the path they were built for, so a lab asking for torch
    never gets the native model loaded before it, and the quantization lab asking for fp32
    never gets the codes. A model loaded "auto" that holds no codes (SmolLM2 is expanded) is
    also the "fp32" one."""
    name, path = resolve_model_name(spec), resolve(kernels)
    key = (name, str(device), dtype, path, weights)
    with _lock:
        if key not in _cache and weights == "fp32":
            auto = _cache.get(key[:-1] + ("auto",))
            if auto is not None and not holds_codes(auto[0]):
                _cache[key] = auto
        if key not in _cache:
            _cache[key] = load_model(name, dtype=dtype, device=device, kernels=path,
                                     weights=weights)
        return _cache[key]


def holds_codes(model) -> bool:
    """Whether any linear of `model` (its lm_head and experts too) multiplies a file's codes
    (GGUF blocks) instead of a float weight."""
    return linear_paths(model).holds_codes


def loaded_description(spec: str) -> ModelConfig | None:
    """The description (`model.config`) of `spec` if a lab has loaded it (any device, dtype
    or kernel path), else None: never loads."""
    name = resolve_model_name(spec)
    with _lock:
        found = next((m for key, (m, _tok) in _cache.items() if key[0] == name), None)
    return None if found is None else found.config


def model_description(spec: str) -> ModelConfig:
    """The description of `spec` as loaded: the model is loaded (and kept) if no lab has it;
    ValueError names a model that is not installed or unknown."""
    return loaded_description(spec) or load_lab_model(spec)[0].config


def description_choices() -> list[tuple[str, str]]:
    """(id, label) of every model a calculator can place: the presets, then each registry
    model that is not one (its own description, read from the loaded model)."""
    presets = list_model_presets()
    out = [(m, load_model_preset(m).name) for m in presets]
    return out + [(name, f"{label}: as loaded") for name, label in model_choices()
                  if name not in presets]


def described(model_id: str, load: bool = True) -> ModelConfig | None:
    """The description of `model_id`: a preset's, else a registry model's as loaded
    (`model_description`; with `load` False, None until some lab has loaded it). None for an
    id that is neither; ValueError for a registry model that is not installed."""
    if model_id in list_model_presets():
        return load_model_preset(model_id)
    if model_id not in MODEL_NAMES:
        return None
    return model_description(model_id) if load else loaded_description(model_id)
