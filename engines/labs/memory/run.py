"""`inferlab run memory`: one GPU's weights and KV for a model at a context and batch on a
target device, what fits and the decode bound, headless: the section the window exports.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from pathlib import Path

from inferlab.engines.fields import option_error
from inferlab.engines.hardware.discovery import get_device
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.labs.memory.section import memory_section
from inferlab.engines.labs.memory.session import (
    LOCAL,
    imported_model,
    local_target,
    memory_plans,
    preset_target,
)
from inferlab.engines.labs.memory.settings import MEMORY_DEFAULTS, check_memory_settings
from inferlab.engines.model.cache import described
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.model.registry import MODEL_NAMES

OPTIONS = {"model": "--model", "context": "--context", "batch": "--batch",
           "weight_dtype": "--weight-dtype", "kv_dtype": "--kv-dtype", "target": "--target",
           "utilization": "--utilization", "tp": "--tp", "pp": "--pp"}


def add_arguments(p) -> None:
    d = MEMORY_DEFAULTS
    p.add_argument("--model", default=d["model"],
                   help=f"model preset id, {', '.join(MODEL_NAMES)} (by its own description as "
                        f"loaded), or a Hugging Face config.json (default {d['model']})")
    p.add_argument("--context", type=int, default=d["context"],
                   help=f"tokens per request (default {d['context']})")
    p.add_argument("--batch", type=int, default=d["batch"],
                   help=f"requests at once (default {d['batch']})")
    p.add_argument("--weight-dtype", default=d["weight_dtype"],
                   help=f"weights' dtype (default {d['weight_dtype']})")
    p.add_argument("--kv-dtype", default=d["kv_dtype"],
                   help=f"KV cache's dtype (default {d['kv_dtype']})")
    p.add_argument("--target", default=d["target"],
                   help=f"GPU preset id, or '{LOCAL}' for --device's memory (default "
                        f"{d['target']})")
    p.add_argument("--device", default="cpu",
                   help=f"the device of --target {LOCAL} (default cpu)")
    p.add_argument("--utilization", type=float, default=d["utilization"],
                   help=f"fraction of device memory usable (default {d['utilization']})")
    p.add_argument("--tp", type=int, default=d["tp"], help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=int, default=d["pp"], help="pipeline stages (default 1)")


def _model(spec: str):
    """(model id as the lab stores it, ModelConfig) of a preset id, a registry model (its
    description as loaded) or a config.json path."""
    if spec.endswith(".json") or Path(spec).is_dir():
        return imported_model(spec)
    cfg = described(spec)
    if cfg is not None:
        return spec, cfg
    try:
        return spec, load_model_preset(spec)
    except ValueError as e:  # it lists the presets; the models by name are known too
        raise ValueError(f"{e}; or a model by name: {', '.join(MODEL_NAMES)}") from None


def run(args, recorder):
    """Plan one GPU's memory for the model on the target."""
    try:
        model_id, cfg = _model(args.model)
    except (ValueError, OSError) as e:
        raise ValueError(f"--model: {e}") from None
    try:
        settings = check_memory_settings(dict(
            MEMORY_DEFAULTS, model=model_id, context=args.context, batch=args.batch,
            weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype, target=args.target,
            utilization=args.utilization, tp=args.tp, pp=args.pp))
    except ValueError as e:
        raise option_error(e, OPTIONS) from None
    if args.target == LOCAL:
        target = local_target(get_device(args.device))
    else:
        preset = load_hardware_preset(args.target)
        if preset.kind != "gpu":
            raise ValueError(f"--target: {args.target} is a {preset.kind}, not a GPU; the "
                             f"lab plans GPUs, or this machine's device ('{LOCAL}')")
        target = preset_target(preset)
    with recorder.span("plan", cat="memory", args={"model": cfg.name, "target": target["id"]}):
        try:
            plan, _variants = memory_plans(settings, cfg, target)
        except ValueError as e:  # a tensor degree that does not split the heads
            raise ValueError(f"--tp: {e}") from None
    section = memory_section(settings, cfg, plan, target)
    return section, section["metrics"] | {"model": cfg.name, "target": target["label"],
                                          "fits": plan.fits,
                                          "decode_tokens_per_s_bound":
                                              plan.decode_tokens_per_s_bound}
