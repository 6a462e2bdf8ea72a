"""The batching lab's settings: their defaults, the table of their ranges and choices, and the
strict check a run, a snapshot and the view all go through.

`trace`: the published trace a run replays instead of the seeded workload (null: none), one
object whose fields mean what `--trace F --trace-format --window --time-scale --sample` mean
on the command line (engines/serve/traces/options.py); the cluster and KV labs keep theirs in
the same field, read by the same `TraceSetting`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from inferlab.engines.fields import Setting, check_settings, read_fields
from inferlab.engines.hardware.presets import list_hardware_presets
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.kv.block_manager import PREFIX_CACHES
from inferlab.engines.kv.radix_cache import EVICTION_POLICIES
from inferlab.engines.model.config import list_model_presets
from inferlab.engines.serve.records import CLOCKS
from inferlab.engines.serve.scenarios import WORKLOADS
from inferlab.engines.serve.scheduler import POLICIES, SCHEDULES
from inferlab.engines.serve.traces.detect import FORMATS
from inferlab.engines.serve.traces.stream import MAX_SAMPLE
from inferlab.engines.serve.traces.window import parse_window


def _read_window(value, where: str) -> str | None:
    """START:END seconds as `--window` takes it (window.parse_window), or null: all."""
    text = Setting("str", max_len=200, none=True).check(value, where)
    if text is not None:
        try:
            parse_window(text)
        except ValueError as e:
            raise ValueError(f"{where}: {str(e).removeprefix('--window ')}") from None
    return text


TRACE_FIELDS = {
    "path": Setting("str", max_len=4096),
    "format": Setting("str", choices=FORMATS, none=True),  # null: read from its first line
    "window": _read_window,
    "time_scale": Setting("float", 1e-6, 1e6),
    "sample": Setting("int", 1, MAX_SAMPLE, none=True),
}
TRACE_DEFAULTS = {"format": None, "window": None, "time_scale": 1.0, "sample": None}


@dataclass(frozen=True)
class TraceSetting:
    """The `trace` settings field: null, or {path, format, window, time_scale, sample} (all
    but the path optional, TRACE_DEFAULTS), plus a lab's own `extra` fields with their
    `extra_defaults`. Checked as a Setting is (`check(value, where)`: ValueError naming the
    field, "settings.trace.window: ...")."""

    extra: Mapping = field(default_factory=dict)
    extra_defaults: Mapping = field(default_factory=dict)

    def check(self, value, where: str) -> dict | None:
        if value is None:
            return None
        return read_fields(value, TRACE_FIELDS | dict(self.extra), where,
                           optional=TRACE_DEFAULTS | dict(self.extra_defaults))

    __call__ = check

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
    "trace": None,  # or a published trace's options (TraceSetting): the Trace tab's replay
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
    "trace": TraceSetting(),
}


def check_batching_settings(settings, where: str = "settings") -> dict:
    """The settings, strictly checked (ValueError naming the field)."""
    return check_settings(settings, BATCHING_SETTINGS, BATCHING_DEFAULTS, where)
