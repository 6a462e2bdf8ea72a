"""`inferlab run moe`: a MoE model decoding the shipped prompts at batch B, headless: each
step's routing, experts touched against E·(1 − (1 − k/E)^B), weights read, grouped against
per-token MoE time, and the B sweep; the section the window exports.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from inferlab.engines.fields import option_error
from inferlab.engines.hardware.microbench import measure_roofs
from inferlab.engines.labs.moe.records import MeasuredRoof
from inferlab.engines.labs.moe.section import moe_section
from inferlab.engines.labs.moe.session import moe_model, moe_run
from inferlab.engines.labs.moe.settings import MOE_DEFAULTS, check_moe_settings

OPTIONS = {"model": "--model", "batch": "--batch", "prompts": "--prompts", "steps": "--steps",
           "sweep": "--sweep", "target": "--target", "mla_model": "--mla-model",
           "kv_dtype": "--kv-dtype"}


def add_arguments(p) -> None:
    d = MOE_DEFAULTS
    p.add_argument("--model", default=d["model"],
                   help=f"tiny-moe, or a MoE .gguf file / Hugging Face folder (default "
                        f"{d['model']}); a dense model is refused")
    p.add_argument("--batch", type=int, default=d["batch"],
                   help=f"sequences decoded at once: tokens per step (default {d['batch']})")
    p.add_argument("--prompts", type=int, default=d["prompts"],
                   help=f"shipped prompts used, cycled over the batch (default {d['prompts']})")
    p.add_argument("--steps", type=int, default=d["steps"],
                   help=f"decode steps recorded per batch (default {d['steps']})")
    p.add_argument("--sweep", default=",".join(map(str, d["sweep"])),
                   help="batches of the B sweep, comma-separated, or 'none' (default "
                        f"{','.join(map(str, d['sweep']))})")
    p.add_argument("--target", default=d["target"],
                   help=f"GPU preset of the intensity formula (default {d['target']})")
    p.add_argument("--mla-model", default=d["mla_model"],
                   help=f"model preset of the MLA KV formula (default {d['mla_model']})")
    p.add_argument("--kv-dtype", default=d["kv_dtype"],
                   help=f"KV dtype of the MLA formula (default {d['kv_dtype']})")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    p.add_argument("--no-roof", action="store_true",
                   help="do not measure this machine's roof (the intensity formula then shows "
                        "the GPU preset only)")


def _sweep(text: str) -> list:
    if text.strip().lower() == "none":
        return []
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--sweep: expected batches like 1,2,4,8 or 'none', got {text!r}") \
            from None


def run(args, recorder):
    """Decode at the batch, then the sweep; measure the roof unless --no-roof."""
    try:
        settings = check_moe_settings(dict(
            MOE_DEFAULTS, model=args.model, batch=args.batch, prompts=args.prompts,
            steps=args.steps, sweep=_sweep(args.sweep), target=args.target,
            mla_model=args.mla_model, kv_dtype=args.kv_dtype))
    except ValueError as e:
        raise option_error(e, OPTIONS) from None
    progress = getattr(args, "progress", None)
    say = progress if progress is not None else (lambda fraction, message: None)
    say(None, f"loading {args.model}")
    with recorder.span("load model", cat="moe", args={"model": args.model}):
        model, _tok = moe_model(settings["model"], args.device, settings["kernels"])

    def on_step(record):
        recorder.counter("moe", {"step_s": record.step_s, "grouped_s": record.grouped_s,
                                 "per_token_s": record.per_token_s})
        say(None, f"batch {record.batch}, step {record.step + 1}")

    with recorder.span("decode", cat="moe", args={"batch": settings["batch"]}):
        info, steps, sweep = moe_run(settings, args.device, on_step=on_step)
    roof = None
    if not args.no_roof:
        say(None, "measuring this machine's roof")
        with recorder.span("measure roof", cat="moe"):
            roofs = measure_roofs(args.device, quick=True)
        roof = MeasuredRoof(roofs.device, roofs.peak_flops["fp32"], roofs.bw_bytes_per_s)
    section = moe_section(settings, model.config, info, steps, sweep, roof)
    return section, section["metrics"] | {"model": info.model_name,
                                          "kernel_path": info.kernel_path}
