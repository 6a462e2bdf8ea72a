"""The MoE lab's closed forms with a snapshot's numbers: distinct experts per step beside the
count measured from the router, the weights a step reads, the decode step's arithmetic
intensity against B on the measured roofline and a GPU preset's (where it crosses the ridge:
why MoE decode wants large batches), active against total parameters, and MLA's KV per token
beside the heads × head_dim cache. Every number comes from engines/roofline (memory.py,
step_costs.py, formulas.py), where the formulas live.
"""

from __future__ import annotations

import statistics

from inferlab.engines.dtypes import BYTES_PER_ELEMENT, bytes_per_element
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.labs.moe.records import MoESnapshot
from inferlab.engines.model.config import ModelConfig, load_model_preset
from inferlab.engines.roofline.formulas import knee_intensity
from inferlab.engines.roofline.memory import (
    attention_variants,
    experts_touched,
    kv_bytes_per_token,
)
from inferlab.engines.roofline.step_costs import decode_step_parts
from inferlab.engines.roofline.units import format_bandwidth, format_bytes, format_flops

CONTEXT = 1024
"""Cached tokens per sequence of the decode step whose linears' intensity is shown (attention
over the cache is a part of its own, about 1 FLOP/byte whatever B, left out)."""
PRESET_DTYPE = "bf16"
"""Weights, KV and peak of the GPU preset's intensity."""
MAX_BATCH_SEARCHED = 1 << 20


def moe_formulas(snapshot: MoESnapshot) -> list[tuple[str, str]]:
    """`snapshot`: what read_moe_section returns. (formula, substituted) pairs; none without a
    run."""
    info, steps, cfg = snapshot.info, snapshot.steps, snapshot.model_config
    if info is None or not steps:
        return []
    e, k, b = info.n_experts, info.top_k, steps[0].batch
    formula = experts_touched(e, k, b)
    measured = statistics.fmean(statistics.fmean(r.distinct_experts) for r in steps)
    bytes_measured = statistics.fmean(r.weight_bytes_per_step for r in steps)
    sizes = " + ".join(f"{d:.2f} × {size:,} B" for d, size in
                       zip(_per_layer_distinct(snapshot), info.expert_bytes, strict=True))
    out = [
        ("distinct experts per MoE layer = E · (1 − (1 − k/E)^B) (uniform routing)",
         f"{e} · (1 − (1 − {k}/{e})^{b}) = {formula:.3f}; measured from the router: "
         f"{measured:.3f} (mean over {len(info.moe_layers)} layers × {len(steps)} steps)"),
        ("weights read per step = dense part + Σ MoE layers distinct experts × expert bytes",
         f"{info.dense_bytes:,} B + {sizes} = {_bytes(bytes_measured)} measured; "
         f"with E·(1 − (1 − k/E)^B): {_bytes(steps[0].weight_bytes_per_step_formula)}; "
         f"all weights {_bytes(info.weight_bytes_total)}"),
        ("active / total parameters (one token reads k of E experts per MoE layer)",
         f"{info.params_active:,} / {info.params_total:,} = "
         f"{info.params_active / info.params_total:.1%}"),
    ]
    roof = snapshot.roof
    if roof is not None:
        dtype = _nearest_dtype(info.weight_bytes_total / info.params_total)
        out.append(_intensity_row(cfg, dtype, dtype, roof.peak_flops, roof.bw_bytes_per_s,
                                  f"{info.model_name} on {roof.device} (measured roof, "
                                  f"weights ≈ {dtype})", b))
    settings = snapshot.settings
    preset_cfg = _preset(settings["mla_model"])
    gpu = _gpu(settings["target"])
    if gpu is not None and PRESET_DTYPE in gpu.peak_flops:
        for model, name in ((cfg, info.model_name), (preset_cfg, settings["mla_model"])):
            if model is not None and model.is_moe:
                out.append(_intensity_row(model, PRESET_DTYPE, PRESET_DTYPE,
                                          gpu.peak_flops[PRESET_DTYPE],
                                          gpu.bandwidth_bytes_per_s,
                                          f"{name} on {gpu.name}, {PRESET_DTYPE}", b))
    if preset_cfg is not None:
        if preset_cfg.is_moe:
            out.append((f"active / total parameters ({settings['mla_model']})",
                        f"{preset_cfg.n_params_active:,} / {preset_cfg.n_params:,} = "
                        f"{preset_cfg.n_params_active / preset_cfg.n_params:.1%}"))
        if preset_cfg.is_mla:
            out += _mla_rows(preset_cfg, settings["mla_model"], settings["kv_dtype"])
    return out


def _per_layer_distinct(snapshot: MoESnapshot) -> list[float]:
    return [statistics.fmean(r.distinct_experts[j] for r in snapshot.steps)
            for j in range(len(snapshot.info.moe_layers))]


def linears_cost(cfg: ModelConfig, batch: int, weight_dtype: str, kv_dtype: str):
    """The "linears" part of a decode step of `batch` tokens (step_costs.decode_step_parts):
    2 · B · active weights FLOPs over the weights its B tokens touch (a MoE layer's experts
    E·(1 − (1 − k/E)^B)) and their activations."""
    parts = decode_step_parts(cfg, batch, CONTEXT, weight_dtype, kv_dtype, weight_dtype)
    return next(p for p in parts if p.name == "linears")


def crossing_batch(cfg: ModelConfig, weight_dtype: str, kv_dtype: str, knee: float) -> int | None:
    """The smallest batch whose decode step's linears (`linears_cost`) have an intensity at or
    past `knee` (doubling, then bisection: intensity grows with B), None past
    MAX_BATCH_SEARCHED."""
    def intensity(batch: int) -> float:
        return linears_cost(cfg, batch, weight_dtype, kv_dtype).intensity

    high = 1
    while intensity(high) < knee:
        high *= 2
        if high > MAX_BATCH_SEARCHED:
            return None
    low = high // 2  # intensity(low) < knee, or low = 0
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if intensity(mid) < knee else (low, mid)
    return high


def _intensity_row(cfg: ModelConfig, weight_dtype: str, kv_dtype: str, peak: float, bw: float,
                   label: str, batch: int) -> tuple[str, str]:
    knee = float(knee_intensity(peak, bw))
    cost = linears_cost(cfg, batch, weight_dtype, kv_dtype)
    cross = crossing_batch(cfg, weight_dtype, kv_dtype, knee)
    where = (f"the linears reach the ridge at B = {cross:,}" if cross is not None
             else f"they stay under the ridge up to B = {MAX_BATCH_SEARCHED:,}")
    return (f"decode linears' intensity I(B) = 2 · B · active weights / bytes of the weights "
            f"B tokens touch, against the ridge P / W ({label})",
            f"I({batch}) = {cost.flops:.4g} FLOP / {cost.bytes_moved:.4g} B = "
            f"{cost.intensity:.3g} FLOP/byte; ridge {format_flops(peak)} / "
            f"{format_bandwidth(bw)} = {knee:.3g} FLOP/byte: {where}")


def _mla_rows(cfg: ModelConfig, name: str, kv_dtype: str) -> list[tuple[str, str]]:
    b = bytes_per_element(kv_dtype)
    mla = kv_bytes_per_token(cfg, kv_dtype)
    mha_cfg = attention_variants(cfg)["MHA"]
    mha = kv_bytes_per_token(mha_cfg, kv_dtype)
    return [
        (f"MLA KV per token = (kv_lora_rank + qk_rope_head_dim) × layers × bytes ({name})",
         f"({cfg.kv_lora_rank} + {cfg.qk_rope_head_dim}) × {cfg.n_layers} × {b:g} B = "
         f"{_bytes(mla)}"),
        (f"MHA KV per token = 2 × heads × head_dim × layers × bytes ({name}, head_dim = "
         "(qk_nope + qk_rope + v_head_dim) / 2)",
         f"2 × {mha_cfg.n_kv_heads} × {mha_cfg.d_head} × {cfg.n_layers} × {b:g} B = "
         f"{_bytes(mha)}; MHA / MLA = {mha / mla:.1f}×"),
    ]


def _nearest_dtype(bytes_per_param: float) -> str:
    """The dtype whose element size is nearest to a model's mean bytes per parameter."""
    return min(BYTES_PER_ELEMENT, key=lambda d: abs(BYTES_PER_ELEMENT[d] - bytes_per_param))


def _preset(model_id: str) -> ModelConfig | None:
    try:
        return load_model_preset(model_id)
    except ValueError:
        return None


def _gpu(preset_id: str):
    try:
        preset = load_hardware_preset(preset_id)
    except ValueError:
        return None
    return preset if preset.kind == "gpu" else None


def _bytes(n: float) -> str:
    return f"{n:,.0f} B ({format_bytes(n)})"
