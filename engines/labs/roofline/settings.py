"""The roofline lab's settings: the compute dtype of the measured roof, the datasheet roofs
drawn beside it, and the model placed on them (its context, weight and KV dtypes)."""

from __future__ import annotations

from inferlab.engines.dtypes import DTYPE_NAMES
from inferlab.engines.fields import Setting, check_settings
from inferlab.engines.hardware.presets import list_hardware_presets

ROOFLINE_DEFAULTS = {"dtype": "fp32", "presets": [], "model": "smollm2-135m", "context": 1024,
                     "weight_dtype": "fp32", "kv_dtype": "fp32"}
MEASURED_DTYPES = ("fp32", "bf16", "fp16")
"""The dtypes operations are measured in; another setting measures them in fp32."""


def _hardware_ids():
    return list_hardware_presets()


ROOFLINE_SETTINGS = {
    "dtype": Setting("str", choices=DTYPE_NAMES),
    "presets": Setting("str-list", choices=_hardware_ids),
    "model": Setting("str"),
    "context": Setting("int", 1, 1_000_000),  # the view's range
    "weight_dtype": Setting("str", choices=DTYPE_NAMES),
    "kv_dtype": Setting("str", choices=DTYPE_NAMES),
}


def check_roofline_settings(settings, where: str = "settings") -> dict:
    """`settings` over the defaults, every field checked (ValueError names the field)."""
    return check_settings(settings, ROOFLINE_SETTINGS, ROOFLINE_DEFAULTS, where)
