"""The batching lab's settings: their defaults, the table of their ranges and choices, and the
strict check a run, a snapshot and the view all go through."""

from __future__ import annotations

from inferlab.engines.fields import Setting, check_settings
from inferlab.engines.hardware.presets import list_hardware_presets
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.kv.block_manager import PREFIX_CACHES
from inferlab.engines.kv.radix_cache import EVICTION_POLICIES
from inferlab.engines.model.config import list_model_presets
from inferlab.engines.serve.records import CLOCKS
from inferlab.engines.serve.scenarios import WORKLOADS
from inferlab.engines.serve.scheduler import POLICIES, SCHEDULES

BATCHING_DEFAULTS = {
    "policy": "continuous",
    "prefix_cache": "hash",  # vLLM v1's default; "radix" is SGLang's tree, "none" off
    "schedule": "fcfs",  # or "lpm": SGLang's longest prefix match first
    "eviction_policy": "lru",  # the radix tree's: or "lfu", "fifo" (SGLang's)
    "scenario": "lognormal",  # or a prefix_workloads scenario: requests that share prefixes
    "clock": "simulated",
    "model_config": "llama-3-8b",  # the simulated clock's model
    "hardware": "h100-sxm",  # the simulated clock's device
    "model": "tiny",  # the wall clock's model (engines.model.cache names)
    "kernels": "auto",  # the wall clock model's kernel path (engines.kernels)
    "requests": 200,
    "rate_per_s": 20.0,
    "prompt_mean": 6.0,  # lognormal, numpy's mean/sigma of the underlying normal: median e^6 ≈ 403
    "prompt_sigma": 0.5,
    "output_mean": 5.0,  # median e^5 ≈ 148 tokens
    "output_sigma": 0.5,
    "seed": 0,
    "max_num_batched_tokens": 2048,
    "max_num_seqs": 128,
    "static_batch_size": 8,
    "slo_ttft_s": 1.0,  # goodput: requests meeting both objectives per second
    "slo_tpot_s": 0.05,
}


def _model_presets():
    return list_model_presets()


def _hardware_presets():
    return list_hardware_presets()


BATCHING_SETTINGS = {  # the view's ranges
    "policy": Setting("str", choices=POLICIES),
    "prefix_cache": Setting("str", choices=PREFIX_CACHES),
    "schedule": Setting("str", choices=SCHEDULES),
    "eviction_policy": Setting("str", choices=EVICTION_POLICIES),
    "scenario": Setting("str", choices=WORKLOADS),
    "clock": Setting("str", choices=CLOCKS),
    "model_config": Setting("str", choices=_model_presets),
    "hardware": Setting("str", choices=_hardware_presets),
    "model": Setting("str"),
    "kernels": Setting("str", choices=KERNEL_SETTING_CHOICES),
    "requests": Setting("int", 1, 100_000),
    "rate_per_s": Setting("float", 0.001, 100_000),
    "prompt_mean": Setting("float", 0, 12),
    "prompt_sigma": Setting("float", 0, 3),
    "output_mean": Setting("float", 0, 12),
    "output_sigma": Setting("float", 0, 3),
    "seed": Setting("int", 0, 2**31 - 1),
    "max_num_batched_tokens": Setting("int", 1, 1_000_000),
    "max_num_seqs": Setting("int", 1, 100_000),
    "static_batch_size": Setting("int", 1, 100_000),
    "slo_ttft_s": Setting("float", 0.000001, 3600),
    "slo_tpot_s": Setting("float", 0.000001, 3600),
}


def check_batching_settings(settings, where: str = "settings") -> dict:
    """The settings, strictly checked (ValueError naming the field)."""
    return check_settings(settings, BATCHING_SETTINGS, BATCHING_DEFAULTS, where)
