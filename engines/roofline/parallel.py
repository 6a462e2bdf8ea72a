"""What one GPU of a tensor- and pipeline-parallel instance holds.

Tensor parallelism (degree t) splits every layer's weights t ways and the KV heads t ways (a
KV head is never split: past t = n_kv_heads each GPU keeps one head, replicated, as vLLM
does); pipeline parallelism (degree p) gives each GPU ⌈L / p⌉ of the L layers, weights and KV
alike. The memory lab draws this split; the cluster lab sizes each instance's KV pool by it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.memory import (
    MemoryPlan,
    kv_bytes_per_token,
    plan_from_bytes,
    weight_bytes,
)


@dataclass(frozen=True)
class GpuShare:
    """One GPU's part of a model under tensor degree `tp` and pipeline degree `pp`."""

    tp: int
    pp: int
    weight_bytes: int  # weight_bytes / (t · p), rounded up
    kv_heads: int  # KV heads on one GPU: max(1, n_kv_heads / t)
    layers: int  # ⌈L / p⌉
    kv_bytes_per_token: int  # the whole model's kv_bytes_per_token × (heads × layers share)

    def to_dict(self) -> dict:
        return asdict(self)


def gpu_share(cfg: ModelConfig, tp: int = 1, pp: int = 1, weight_dtype: str = "fp16",
              kv_dtype: str = "fp16") -> GpuShare:
    """One GPU's weights and KV bytes per token:

        weight_bytes_per_gpu = ⌈weight_bytes / (t · p)⌉
        kv_heads_per_gpu     = max(1, n_kv_heads / t)      (t must divide n_kv_heads, or be a
                                                            multiple of it)
        kv_bytes_per_token_per_gpu = 2 × ⌈L / p⌉ × kv_heads_per_gpu × d_head × bytes(kv_dtype)

    For t = p = 1 these are weight_bytes and kv_bytes_per_token exactly."""
    for name, value in (("tp", tp), ("pp", pp)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    n_kv = cfg.n_kv_heads
    if n_kv % tp and tp % n_kv:
        raise ValueError(f"tp={tp} neither divides nor is a multiple of {cfg.id}'s "
                         f"{n_kv} KV heads")
    if cfg.n_heads % tp:
        raise ValueError(f"tp={tp} does not divide {cfg.id}'s {cfg.n_heads} attention heads")
    if pp > cfg.n_layers:
        raise ValueError(f"pp={pp} exceeds {cfg.id}'s {cfg.n_layers} layers")
    heads = max(1, n_kv // tp)
    layers = math.ceil(cfg.n_layers / pp)
    whole = kv_bytes_per_token(cfg, kv_dtype)
    kv = whole * heads * layers // (n_kv * cfg.n_layers)
    return GpuShare(tp=tp, pp=pp, weight_bytes=math.ceil(weight_bytes(cfg, weight_dtype) / (tp * pp)),
                    kv_heads=heads, layers=layers, kv_bytes_per_token=kv)


def plan_gpu_share(cfg: ModelConfig, context: int, batch: int, tp: int = 1, pp: int = 1,
                   weight_dtype: str = "fp16", kv_dtype: str = "fp16",
                   device_memory_bytes: int = 80_000_000_000, utilization: float = 0.9,
                   bw_bytes_per_s: float | None = None) -> MemoryPlan:
    """`plan_memory` for ONE GPU of a t × p group serving `batch` sequences of `context`
    tokens: its weights and KV bytes per token are `gpu_share`'s (every GPU holds a slice of
    every sequence's KV). With t = p = 1 it is plan_memory exactly."""
    share = gpu_share(cfg, tp, pp, weight_dtype, kv_dtype)
    return plan_from_bytes(cfg.id, share.weight_bytes, share.kv_bytes_per_token, context,
                           batch, weight_dtype, kv_dtype, device_memory_bytes, utilization,
                           bw_bytes_per_s, tp, pp)
