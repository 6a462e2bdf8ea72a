"""The quantization lab's settings: the model, the layer drawn (layer index, which linear, a
data-free scheme), the schemes the model tab runs, whether their decode speed is timed, and
how perplexity is computed (`ppl_convention` "sliding" or "llama.cpp", `ppl_window_tokens` —
null: the model's whole context — and `ppl_stride_tokens` — null: window - 1); and the
scheme names there are to choose from."""

from __future__ import annotations

from inferlab.engines.fields import Setting, check_settings
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.model.perplexity import CONVENTIONS, SLIDING, WINDOW
from inferlab.engines.quant.evaluate import NAMES
from inferlab.engines.quant.schemes import SCHEMES

FP32 = "fp32"
BF16 = "bf16"
KV_SCHEMES = {"kv-int8": "int8", "kv-fp8": "fp8-e4m3"}
LINEAR_CHOICES = ("qkv", "o", "gate_up", "down")


def lab_schemes() -> tuple[str, ...]:
    """Every name the lab runs on the whole model (`evaluation.run_scheme`), baseline first:
    "fp32" (the model as loaded), "bf16", every weight scheme of `engines.quant.evaluate
    .NAMES`, and the KV schemes."""
    return (FP32, BF16, *NAMES, *KV_SCHEMES)


def layer_schemes() -> tuple[str, ...]:
    """The data-free schemes one linear can be drawn under."""
    return tuple(SCHEMES)


QUANT_DEFAULTS = {
    "model": "auto",  # engines.model.cache names (no MoE: tiny-moe is refused), auto, a path
    "layer": 0,
    "linear": "gate_up",
    "layer_scheme": "int4-g128",
    # Data-free schemes that finish in seconds; GPTQ and AWQ calibrate for minutes on a CPU.
    "schemes": ["fp32", "int8", "fp8-e4m3", "q4_1", "int4-g128", "sparse-2:4", "kv-int8"],
    "measure_speed": True,
    "decode_tokens": 32,
    "kernels": "auto",  # the fp32 model's kernel path (engines.kernels)
    "ppl_convention": SLIDING,
    "ppl_window_tokens": WINDOW,  # None: the model's whole context
    "ppl_stride_tokens": None,  # None: window - 1 (llama.cpp: the window)
}
PPL_KEYS = ("ppl_convention", "ppl_window_tokens", "ppl_stride_tokens")

QUANT_SETTINGS = {
    "model": Setting("str"),
    "layer": Setting("int", 0, 10_000),
    "linear": Setting("str", choices=LINEAR_CHOICES),
    "layer_scheme": Setting("str", choices=layer_schemes),
    "schemes": Setting("str-list", choices=lab_schemes),
    "measure_speed": Setting("bool"),
    "decode_tokens": Setting("int", 2, 512),
    "kernels": Setting("str", choices=KERNEL_SETTING_CHOICES),
    "ppl_convention": Setting("str", choices=CONVENTIONS),
    "ppl_window_tokens": Setting("int", 4, 1 << 20, none=True),
    "ppl_stride_tokens": Setting("int", 1, 1 << 20, none=True),
}


def check_quant_settings(settings, where: str = "settings") -> dict:
    s = check_settings(settings, QUANT_SETTINGS, QUANT_DEFAULTS, where)
    if not s["model"].strip():
        raise ValueError(f"{where}.model: expected a model name or path, got {s['model']!r}")
    return s
