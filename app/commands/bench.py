"""`inferlab bench LAB --json`: benchmarks whose figures go in notes (ratios, side by side).

The labs' benches come from the registry; `gui` (the window's start-up and frame gaps) is the
app's own. A bench whose optional package (`LabSpec.bench_requires`) is not installed is
reported as not available; any other failure, an import error inside a lab included, is an
error with its traceback.
"""

from __future__ import annotations

import importlib.util

from inferlab.app.cli import print_json
from inferlab.app.labs import registry
from inferlab.app.labs.registry import resolve

APP_BENCHES = {"gui": "inferlab.app.benches.gui:run_gui_bench"}


def benches() -> dict[str, tuple[str, tuple[str, ...]]]:
    """bench name -> (function reference, optional packages it needs)."""
    found = {spec.id: (spec.bench, spec.bench_requires) for spec in registry.LABS if spec.bench}
    return found | {name: (ref, ()) for name, ref in APP_BENCHES.items()}


def register(sub) -> None:
    names = list(benches())
    p = sub.add_parser("bench", help="run a benchmark: " + ", ".join(names) + ", or all")
    p.add_argument("lab", choices=[*names, "all"])
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _run_one(name: str) -> dict:
    from inferlab.app.offscreen import ensure_platform

    ref, requires = benches()[name]
    missing = [pkg for pkg in requires if importlib.util.find_spec(pkg) is None]
    if missing:
        return {"error": f"not available: needs {', '.join(missing)} (not installed)"}
    ensure_platform()
    return resolve(ref)()


def run(args) -> int:
    names = list(benches()) if args.lab == "all" else [args.lab]
    results = {name: _run_one(name) for name in names}
    data = results if args.lab == "all" else results[args.lab]
    if args.json:
        print_json(data)
    else:
        for name, figures in results.items():
            print(f"[{name}]")
            for key, value in figures.items():
                print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    return 0
