"""The MoE lab's settings: the model it decodes, the batch, the shipped prompts and decode
steps, the batch sweep, the kernel path, and the presets its closed forms are shown for (a GPU
for the roofline, an MLA model for the KV formula)."""

from __future__ import annotations

from inferlab.engines.dtypes import DTYPE_NAMES
from inferlab.engines.fields import Setting, check_settings
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES

MAX_BATCH = 256
MOE_DEFAULTS = {"model": "tiny-moe", "batch": 32, "prompts": 32, "steps": 8,
                "sweep": [1, 2, 4, 8, 16, 32], "kernels": "auto", "target": "h100-sxm",
                "mla_model": "deepseek-v3", "kv_dtype": "bf16"}
MOE_SETTINGS = {  # the view's ranges
    "model": Setting("str", max_len=4096),  # tiny-moe, a MoE GGUF file or Hugging Face folder
    "batch": Setting("int", 1, MAX_BATCH),  # sequences decoded at once: tokens per step
    "prompts": Setting("int", 1, 10_000),  # shipped prompts used, cycled over the batch
    "steps": Setting("int", 1, 1024),  # decode steps recorded
    "sweep": Setting("int-list", 1, MAX_BATCH, max_len=16),  # batches of the B sweep ([]: none)
    "kernels": Setting("str", choices=KERNEL_SETTING_CHOICES),
    "target": Setting("str", max_len=200),  # GPU preset of the intensity formula
    "mla_model": Setting("str", max_len=200),  # model preset of the MLA KV formula
    "kv_dtype": Setting("str", choices=DTYPE_NAMES),  # of the MLA KV formula
}


def check_moe_settings(settings, where: str = "settings") -> dict:
    """The defaults overlaid with `settings`, every field checked (ValueError names it)."""
    return check_settings(settings, MOE_SETTINGS, MOE_DEFAULTS, where)
