"""`inferlab bench LAB --json`: benchmarks whose figures go in notes (ratios, side by side)."""

from __future__ import annotations

import importlib

from inferlab.app.cli import print_json

# bench name -> (module, function). Later labs add theirs here.
BENCHES = {
    "roofline": ("inferlab.app.benches.roofline", "run_roofline_bench"),
    "gui": ("inferlab.app.benches.gui", "run_gui_bench"),
    "kv": ("inferlab.app.benches.kv", "run_kv_lab_bench"),
    "mcu": ("inferlab.engines.mcu.bench", "run_mcu_bench"),
}


def register(sub) -> None:
    p = sub.add_parser("bench", help="run a benchmark: " + ", ".join(BENCHES) + ", or all")
    p.add_argument("lab", choices=[*BENCHES, "all"])
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _run_one(name: str) -> dict:
    from inferlab.app.offscreen import ensure_platform

    ensure_platform()
    module, function = BENCHES[name]
    return getattr(importlib.import_module(module), function)()


def run(args) -> int:
    names = list(BENCHES) if args.lab == "all" else [args.lab]
    results = {}
    for name in names:
        try:
            results[name] = _run_one(name)
        except ModuleNotFoundError as exc:
            results[name] = {"error": f"not available: {exc}"}
    data = results if args.lab == "all" else results[args.lab]
    if args.json:
        print_json(data)
    else:
        for name, figures in results.items():
            print(f"[{name}]")
            for key, value in figures.items():
                print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    return 0
