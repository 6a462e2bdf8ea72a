"""`inferlab run roofline`: this device's roofs and its operations measured on them, with a
model preset placed beside datasheet roofs, headless: the section the window exports.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from inferlab.engines.fields import option_error
from inferlab.engines.labs.roofline.section import roofline_section
from inferlab.engines.labs.roofline.session import measure_roofline
from inferlab.engines.labs.roofline.settings import ROOFLINE_DEFAULTS, check_roofline_settings
from inferlab.engines.model.cache import described
from inferlab.engines.model.registry import MODEL_NAMES

OPTIONS = {"dtype": "--dtype", "presets": "--preset", "model": "--model",
           "context": "--context", "weight_dtype": "--weight-dtype", "kv_dtype": "--kv-dtype"}


def add_arguments(p) -> None:
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    p.add_argument("--dtype", default=ROOFLINE_DEFAULTS["dtype"],
                   help="the roof drawn and the operations measured in it: fp32, bf16, fp16 "
                        "(default fp32)")
    p.add_argument("--preset", action="append", default=None, metavar="ID",
                   help="a datasheet roof drawn beside the measured one (h100-sxm, ...); "
                        "repeatable")
    p.add_argument("--model", default=ROOFLINE_DEFAULTS["model"],
                   help=f"model placed on the roofline: a preset id, or {', '.join(MODEL_NAMES)} "
                        f"by its own description as loaded (default "
                        f"{ROOFLINE_DEFAULTS['model']})")
    p.add_argument("--context", type=int, default=ROOFLINE_DEFAULTS["context"],
                   help=f"tokens of context of its decode steps (default "
                        f"{ROOFLINE_DEFAULTS['context']})")
    p.add_argument("--weight-dtype", default=ROOFLINE_DEFAULTS["weight_dtype"],
                   help="its weights' dtype (default fp32)")
    p.add_argument("--kv-dtype", default=ROOFLINE_DEFAULTS["kv_dtype"],
                   help="its KV cache's dtype (default fp32)")
    p.add_argument("--full", action="store_true",
                   help="full-size measurements (slower, exact; default quick sizes)")


def run(args, recorder):
    """Measure the roofs and operations of `--device`; place the model."""
    try:
        settings = check_roofline_settings(dict(
            ROOFLINE_DEFAULTS, dtype=args.dtype, presets=list(args.preset or []),
            model=args.model, context=args.context, weight_dtype=args.weight_dtype,
            kv_dtype=args.kv_dtype))
    except ValueError as e:
        raise option_error(e, OPTIONS) from None
    try:
        cfg = described(settings["model"])
    except ValueError as e:  # a registry model that is not installed
        raise ValueError(f"--model: {e}") from None
    if cfg is None:
        raise ValueError(f"--model: no model preset or installed model "
                         f"{settings['model']!r}")
    with recorder.span("measure roofs and operations", cat="roofline",
                       args={"device": args.device}):
        roofs, points = measure_roofline(args.device, settings["dtype"], not args.full,
                                         getattr(args, "progress", None))
    for point in points:
        recorder.counter("achieved GFLOP/s", {point.name: point.achieved_flops_per_s / 1e9})
    section = roofline_section(settings, roofs, points, cfg)
    return section, section["metrics"] | {
        "points": [{"name": p.name, "intensity": p.intensity,
                    "achieved_flops_per_s": p.achieved_flops_per_s} for p in points]}
