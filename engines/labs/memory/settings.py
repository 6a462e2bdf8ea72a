"""The memory (KV/VRAM) lab's settings: the model, its context and batch, the weight and KV
dtypes, the target device, the memory utilisation, and the tensor and pipeline degrees."""

from __future__ import annotations

from inferlab.engines.dtypes import DTYPE_NAMES
from inferlab.engines.fields import Setting, check_settings

MEMORY_DEFAULTS = {"model": "llama-3-8b", "context": 8192, "batch": 1, "weight_dtype": "fp16",
                   "kv_dtype": "fp16", "target": "h100-sxm", "utilization": 0.9,
                   "tp": 1, "pp": 1}
MEMORY_SETTINGS = {  # the view's ranges
    "model": Setting("str"),
    "context": Setting("int", 1, 10_000_000),
    "batch": Setting("int", 1, 100_000),
    "weight_dtype": Setting("str", choices=DTYPE_NAMES),
    "kv_dtype": Setting("str", choices=DTYPE_NAMES),
    "target": Setting("str"),
    "utilization": Setting("float", 0.05, 1.0),
    "tp": Setting("int", 1, 1024),  # tensor-parallel degree: the plan is one GPU's
    "pp": Setting("int", 1, 1024),  # pipeline stages
}


def check_memory_settings(settings, where: str = "settings") -> dict:
    """`settings` over the defaults, every field checked (ValueError names the field)."""
    return check_settings(settings, MEMORY_SETTINGS, MEMORY_DEFAULTS, where)
