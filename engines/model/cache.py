"""The app-wide model cache: every lab's model by name, SmolLM2-135M when it is installed
(`auto`), the seeded tiny model otherwise.

`load_lab_model` keeps what it loaded, so resetting a scenario, switching between them or
between labs does not read the GGUF again.
"""

from __future__ import annotations

import threading

from inferlab.engines.kernels import resolve
from inferlab.engines.model.registry import MODEL_NAMES, SMOLLM2_ID, load_model, smollm2_gguf_path

AUTO = "auto"
"""SmolLM2 when installed, else tiny."""

_cache: dict[tuple[str, str, str, str], tuple] = {}
_lock = threading.Lock()


def smollm2_available() -> bool:
    try:
        smollm2_gguf_path()
    except ValueError:
        return False
    return True


def resolve_model_name(spec: str) -> str:
    """`auto` becomes smollm2-135m or tiny; anything else is returned as it is."""
    if spec == AUTO:
        return SMOLLM2_ID if smollm2_available() else "tiny"
    return spec


def model_choices() -> list[tuple[str, str]]:
    """(spec, label) for a model menu: the installed names first."""
    out = []
    for name in MODEL_NAMES:
        if name == SMOLLM2_ID:
            label = "SmolLM2-135M-Instruct (real)" if smollm2_available() else \
                "SmolLM2-135M (not installed)"
        elif name == "tiny":
            label = "tiny (random weights, fast)"
        elif name == "tiny-moe":
            label = "tiny MoE (random weights, 16 experts, top-2)"
        else:
            label = name
        out.append((name, label))
    return out


def load_lab_model(spec: str, device: str = "cpu", dtype: str = "fp32",
                   kernels: str | None = "auto"):
    """(model, tokenizer) for `spec` (auto, a registry name or a path) on the kernel path
    `kernels` (a lab's `kernels` setting: "auto" is the process default), cached per path too:
    a model's layers keep the path they were built for, so a lab asking for torch never gets
    the native model loaded before it."""
    name, path = resolve_model_name(spec), resolve(kernels)
    key = (name, str(device), dtype, path)
    with _lock:
        if key not in _cache:
            _cache[key] = load_model(name, dtype=dtype, device=device, kernels=path)
        return _cache[key]
