"""The KV lab's settings: the table the window, remembered settings and snapshots are checked
against, and its defaults.

`trace`: a published trace run instead of the scenario (null: none), the batching lab's field
(TraceSetting) with what `run kv --trace` adds: `length_scale` (lengths and block size × X,
in (0, 1]), `step_s` (trace seconds per step) and `seed` (the sample's)."""

from __future__ import annotations

from inferlab.engines.fields import Setting, check_settings
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.kv.block_manager import PREFIX_CACHES
from inferlab.engines.kv.radix_cache import EVICTION_POLICIES
from inferlab.engines.labs.batching.settings import TraceSetting
from inferlab.engines.labs.kv.scenarios import SCENARIO_NAMES
from inferlab.engines.labs.kv.trace_scenario import STEP_S

KV_DEFAULTS = {"scenario": "shared-prompt", "model": "auto", "block_size": 16, "n_blocks": 0,
               "kv_dtype": "model", "kernels": "auto", "prefix_cache": "hash",
               "eviction_policy": "lru", "trace": None}
KV_DTYPES = ("model", "int8", "fp8-e4m3")
"""What the pool stores: the model's own dtype, or INT8 / FP8 E4M3 codes with one fp32 scale
per token and head (engines.quant.kv_quant; attention dequantizes on read)."""
KV_SETTINGS = {  # the view's ranges
    "scenario": Setting("str", choices=SCENARIO_NAMES),
    "model": Setting("str"),
    "block_size": Setting("int", 1, 1024),
    "n_blocks": Setting("int", 0, 1_000_000),
    "kv_dtype": Setting("str", choices=KV_DTYPES),
    "kernels": Setting("str", choices=KERNEL_SETTING_CHOICES),
    "prefix_cache": Setting("str", choices=PREFIX_CACHES),
    "eviction_policy": Setting("str", choices=EVICTION_POLICIES),
    "trace": TraceSetting(
        extra={"length_scale": Setting("float", 1e-6, 1.0), "step_s": Setting("float", 1e-6, 3600),
               "seed": Setting("int", 0, 2**31 - 1)},
        extra_defaults={"length_scale": 1.0, "step_s": STEP_S, "seed": 0}),
}


def check_kv_settings(settings, where: str = "settings") -> dict:
    """The defaults overlaid with `settings`, every field checked (ValueError names it)."""
    return check_settings(settings, KV_SETTINGS, KV_DEFAULTS, where)
