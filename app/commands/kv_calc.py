"""`inferlab kv-calc`: KV-cache and weight memory of a model; what fits on a device."""

from __future__ import annotations

from inferlab.app.cli import print_json
from inferlab.engines.dtypes import DTYPE_NAMES
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.model.hf_config import load_hf_config
from inferlab.engines.roofline.memory import (
        MAX_BATCH,
        MAX_CONTEXT,
        check_count,
        check_positive,
        kv_bytes_by_layer_kind,
        plan_memory,
        weight_bytes_active_per_token,
    )
from inferlab.engines.roofline.units import format_bytes


def register(sub) -> None:
    p = sub.add_parser("kv-calc", help="KV cache / VRAM calculator")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", default="llama-3-8b", help="model preset id (default llama-3-8b)")
    src.add_argument("--config", help="a Hugging Face config.json instead of --model")
    p.add_argument("--context", type=int, default=8192, help="tokens per request")
    p.add_argument("--batch", type=int, default=1, help="requests resident at once")
    p.add_argument("--kv-dtype", default="fp16", choices=DTYPE_NAMES)
    p.add_argument("--weight-dtype", default="fp16", choices=DTYPE_NAMES)
    p.add_argument("--gpu", default="h100-sxm",
                   help="hardware preset id whose memory and bandwidth bound the batch")
    p.add_argument("--utilization", type=float, default=0.9,
                   help="fraction of device memory usable (default 0.9)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:

    check_count("--context", args.context, MAX_CONTEXT)
    check_count("--batch", args.batch, MAX_BATCH)
    check_positive("--utilization", args.utilization, 1.0)
    cfg = load_hf_config(args.config) if args.config else load_model_preset(args.model)
    gpu = load_hardware_preset(args.gpu)
    plan = plan_memory(cfg, context=args.context, batch=args.batch,
                       weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                       device_memory_bytes=gpu.memory_bytes, utilization=args.utilization,
                       bw_bytes_per_s=gpu.bandwidth_bytes_per_s)
    active = weight_bytes_active_per_token(cfg, args.weight_dtype)
    by_kind = kv_bytes_by_layer_kind(cfg, args.context, args.kv_dtype)
    data = plan.to_dict() | {
        "params_total": cfg.n_params, "params_active_per_token": cfg.n_params_active,
        "weight_bytes_active_per_token": active,
        "kv_by_layer_kind": {kind: {"layers": n, "kv_bytes_per_token": tok,
                                    "kv_bytes_per_request": req}
                             for kind, (n, tok, req) in by_kind.items()},
        "model_config": cfg.to_dict(), "device": gpu.id}
    if args.json:
        print_json(data)
        return 0
    attention = "MLA" if cfg.is_mla else cfg.attention_kind
    print(f"{cfg.name} ({attention}) on {gpu.name}, context {args.context}, batch {args.batch}")
    print(f"  KV per token   {plan.kv_bytes_per_token:,} B")
    if len(by_kind) > 1:
        for kind, (n, tok, req) in by_kind.items():
            print(f"    {kind:8s} {n} layers: {tok:,} B per token, {format_bytes(req)} per request")
    print(f"  KV per request {format_bytes(plan.kv_bytes_per_request)} at {args.context:,} tokens")
    print(f"  KV for batch   {format_bytes(plan.kv_bytes_total)} ({format_bytes(plan.kv_bytes_total, binary=False)})")
    print(f"  weights        {format_bytes(plan.weight_bytes)} ({format_bytes(plan.weight_bytes, binary=False)}; "
          f"{cfg.n_params / 1e9:,.2f}B params)")
    if cfg.is_moe:
        print(f"  active weights {format_bytes(active)} ({format_bytes(active, binary=False)}) per token "
              f"({cfg.n_params_active / 1e9:,.2f}B "
              f"params: {cfg.n_experts_active} of {cfg.n_experts} experts)")
    print(f"  total          {format_bytes(plan.total_bytes)} of {format_bytes(plan.budget_bytes)} usable"
          f" -> {'fits' if plan.fits else 'does NOT fit'}")
    print(f"  max batch {plan.max_batch:,} at this context; max context {plan.max_context:,} at this batch")
    if plan.decode_tokens_per_s_bound is not None:
        print(f"  decode upper bound {plan.decode_tokens_per_s_bound:,.0f} tokens/s")
    return 0
