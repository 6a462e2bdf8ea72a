"""What one GPU of a tensor- and pipeline-parallel instance holds.

Tensor parallelism (degree t) splits every layer's weights t ways and the KV heads t ways (a
KV head is never split: past t = n_kv_heads each GPU keeps one head, replicated, as vLLM
does; MLA's latent serves every head, so each GPU keeps it whole); pipeline parallelism
(degree p) gives each GPU ⌈L / p⌉ of the L layers, weights and KV alike. The memory lab draws
this split; the cluster lab sizes each instance's KV pool by it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.memory import (
    MAX_COUNT,
    KVLayers,
    MemoryPlan,
    check_count,
    kv_layers,
    plan_from_bytes,
    weight_bytes,
    weight_bytes_per_step,
)


@dataclass(frozen=True)
class GpuShare:
    """One GPU's part of a model under tensor degree `tp` and pipeline degree `pp`."""

    tp: int
    pp: int
    weight_bytes: int  # weight_bytes / (t · p), rounded up
    kv_heads: int  # KV heads on one GPU: max(1, n_kv_heads / t) (MLA: its latent, whole)
    layers: int  # ⌈L / p⌉
    kv_bytes_per_token: int  # Σ over the GPU's layers of its heads' bytes per token
    kv_layers: tuple[KVLayers, ...] = ()  # the GPU's layers by window (memory.kv_layers)

    def to_dict(self) -> dict:
        return asdict(self)


def pipeline_stage(cfg: ModelConfig, pp: int) -> range:
    """The layers of the stage whose cache is largest: stages are runs of ⌈L / p⌉ layers (the
    last may be shorter); the fullest one with the most full-attention layers (the layers
    whose cache grows with the context), the first of equals."""
    size = math.ceil(cfg.n_layers / pp)
    stages = [range(s, min(cfg.n_layers, s + size)) for s in range(0, cfg.n_layers, size)]
    return max(stages, key=lambda r: (len(r), sum(cfg.layer_window(i) == 0 for i in r)))


def gpu_share(cfg: ModelConfig, tp: int = 1, pp: int = 1, weight_dtype: str = "fp16",
              kv_dtype: str = "fp16") -> GpuShare:
    """One GPU's weights and KV bytes per token:

        weight_bytes_per_gpu = ⌈weight_bytes / (t · p)⌉
        kv_heads_per_gpu     = max(1, n_kv_heads / t)      (t must divide n_kv_heads, or be a
                                                            multiple of it)
        kv_bytes_per_token_per_gpu = ⌈L / p⌉ × ⌈2 × kv_heads_per_gpu × d_head × bytes(kv_dtype)⌉
                                     (MLA: ⌈L / p⌉ × ⌈(kv_lora_rank + qk_rope_head_dim) × bytes⌉)

    The ⌈L / p⌉ layers are pipeline_stage's, with their windows (kv_layers). For t = p = 1
    these are weight_bytes and kv_bytes_per_token exactly."""
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
    stage = pipeline_stage(cfg, pp)
    groups = kv_layers(cfg, kv_dtype, stage if pp > 1 else None, heads if tp > 1 else None)
    return GpuShare(tp=tp, pp=pp, weight_bytes=math.ceil(weight_bytes(cfg, weight_dtype) / (tp * pp)),
                    kv_heads=heads, layers=len(stage),
                    kv_bytes_per_token=sum(g.n_layers * g.bytes_per_token for g in groups),
                    kv_layers=groups)


def plan_gpu_share(cfg: ModelConfig, context: int, batch: int, tp: int = 1, pp: int = 1,
                   weight_dtype: str = "fp16", kv_dtype: str = "fp16",
                   device_memory_bytes: int = 80_000_000_000, utilization: float = 0.9,
                   bw_bytes_per_s: float | None = None) -> MemoryPlan:
    """`plan_memory` for ONE GPU of a t × p group serving `batch` sequences of `context`
    tokens: its weights and KV layers are `gpu_share`'s (every GPU holds a slice of every
    sequence's KV), a decode step reads 1/(t · p) of weight_bytes_per_step. With t = p = 1 it
    is plan_memory exactly."""
    share = gpu_share(cfg, tp, pp, weight_dtype, kv_dtype)
    check_count("batch", batch, MAX_COUNT)
    per_step = math.ceil(weight_bytes_per_step(cfg, weight_dtype, batch) / (tp * pp))
    return plan_from_bytes(cfg.id, share.weight_bytes, share.kv_layers, context,
                           batch, weight_dtype, kv_dtype, device_memory_bytes, utilization,
                           bw_bytes_per_s, tp, pp, weights_per_step=per_step)
