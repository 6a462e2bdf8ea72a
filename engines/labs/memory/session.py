"""What the memory (KV/VRAM) lab computes: the targets a plan is made for (this machine's
device, the GPU presets), and the plans themselves — one GPU's weights and KV for the
settings, the MHA/GQA/MQA variants beside it (and the model itself first where it uses MLA),
and what the model's own description changes in them: layers by kind, MLA, a MoE's weights
(engines/roofline/memory.py and parallel.py hold the formulas). The lab and `inferlab run
memory` both plan here."""

from __future__ import annotations

from pathlib import Path

from inferlab.engines.hardware.presets import all_hardware_presets
from inferlab.engines.labs.memory.records import KVKind, ModelMemory
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.model.hf_config import load_hf_config
from inferlab.engines.roofline.memory import (
    attention_variants,
    experts_touched,
    weight_bytes_active_per_token,
)
from inferlab.engines.roofline.parallel import gpu_share, plan_gpu_share
from inferlab.engines.roofline.units import format_bytes

LOCAL = "local"  # target id of the selected compute device (with its measured bandwidth)
IMPORTED = "imported:"  # the prefix of a model id that names an imported config.json


def imported_model(path: str | Path) -> tuple[str, ModelConfig]:
    """(model id as the lab stores it, ModelConfig) of a Hugging Face config.json: the
    window's Import and `inferlab run memory --model F.json` name it the same way."""
    path = Path(path)
    return f"{IMPORTED}{path.resolve()}", load_hf_config(path)


def local_target(device, roofs=None) -> dict:
    """`device` (a DeviceInfo) as a target, with its measured bandwidth when `roofs` (its
    MeasuredRoofs) are known."""
    return {
        "id": LOCAL,
        "label": f"This machine: {device.id} ({format_bytes(device.memory_bytes)}"
                 + (f", measured {roofs.bw_bytes_per_s / 1e9:.0f} GB/s)" if roofs
                    else ", not measured)"),
        "memory_bytes": device.memory_bytes,
        "bw_bytes_per_s": roofs.bw_bytes_per_s if roofs else None,
    }


def memory_targets(device, roofs=None) -> dict[str, dict]:
    """Target id → {"id", "label", "memory_bytes", "bw_bytes_per_s"}: this machine's
    `device` first (`local_target`), then every GPU preset."""
    targets = {LOCAL: local_target(device, roofs)}
    for preset in all_hardware_presets():
        if preset.kind == "gpu":
            targets[preset.id] = preset_target(preset)
    return targets


def preset_target(preset) -> dict:
    """A hardware preset as a memory-lab target."""
    return {"id": preset.id, "label": preset.name,
            "memory_bytes": preset.memory_bytes, "bw_bytes_per_s": preset.bandwidth_bytes_per_s}


def memory_plans(settings: dict, cfg: ModelConfig, target: dict):
    """One GPU's plan under the settings' tensor degree t and pipeline stages p
    (roofline.parallel.plan_gpu_share; ValueError when t does not split the heads), and the
    MHA/GQA/MQA variants' (config, plan) beside it."""
    kwargs = dict(context=int(settings["context"]), batch=int(settings["batch"]),
                  weight_dtype=settings["weight_dtype"], kv_dtype=settings["kv_dtype"],
                  device_memory_bytes=int(target["memory_bytes"]),
                  utilization=float(settings["utilization"]),
                  bw_bytes_per_s=target.get("bw_bytes_per_s"))
    tp, pp = int(settings.get("tp", 1)), int(settings.get("pp", 1))
    plan = plan_gpu_share(cfg, tp=tp, pp=pp, **kwargs)
    variants = {}
    for kind, vcfg in attention_variants(cfg).items():
        try:  # t may split the model's KV heads but not MQA's one (it is replicated) etc.
            variants[kind] = (vcfg, plan_gpu_share(vcfg, tp=tp, pp=pp, **kwargs))
        except ValueError:
            continue
    return plan, variants


def model_memory(cfg: ModelConfig, plan) -> ModelMemory:
    """`cfg`'s own description as one GPU of the plan (its t × p, context, batch and dtypes)
    holds it: the layers by kind (gpu_share's KV layers), the all-global KV per request, MLA's
    values per layer, a MoE's weights in total, per token and per decode step."""
    share = gpu_share(cfg, plan.tp, plan.pp, plan.weight_dtype, plan.kv_dtype)
    windowed_kind = next((cfg.layer_kind(i) for i in range(cfg.n_layers)
                          if cfg.layer_window(i)), "sliding")
    kinds = tuple(KVKind("full" if g.window == 0 else windowed_kind, g.n_layers, g.window,
                         g.n_layers * g.bytes_per_token, int(g.bytes_held(plan.context)))
                  for g in share.kv_layers)
    touched = (experts_touched(cfg.n_experts, cfg.n_experts_active, plan.batch)
               if cfg.is_moe else 0.0)
    active = weight_bytes_active_per_token(cfg, plan.weight_dtype)
    return ModelMemory(kinds, share.kv_bytes_per_token * plan.context,
                       cfg.kv_values_per_token_per_layer, cfg.n_params, cfg.n_params_active,
                       -(-active // (plan.tp * plan.pp)), touched)
