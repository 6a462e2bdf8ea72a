"""`inferlab bench LAB --json`: benchmarks whose figures go in notes (ratios, side by side).

The labs' benches come from the registry; `gui` (the window's start-up and frame gaps),
`runtime` (the native CPU kernels against torch's ops), `prefix` (hash vs radix prefix
caching and FCFS vs LPM, for the KV and batching labs together) and `traces` (published-trace
reading and replay through the batching lab) are the app's own. A bench whose
optional package (`LabSpec.bench_requires`) is not installed is reported as not available;
any other failure, an import error inside a lab included, is an error with its traceback.

A lab's bench may take options (`LabSpec.bench_arguments`, e.g. `bench endpoint --url URL`):
they are added to this one parser, in a group named for the lab, and that bench is called as
`bench(args)`. An option given to a bench that does not take it is refused, naming the
benches that do.

While benches run, stderr shows which one and for how long when it is a terminal
(app/cli_progress.py); stdout holds only the figures.
"""

from __future__ import annotations

import importlib.util

from inferlab.app.cli import add_kernels_option, print_json
from inferlab.app.cli_progress import CliProgress
from inferlab.app.gui import create_application
from inferlab.app.labs import registry
from inferlab.app.labs.registry import resolve
from inferlab.app.offscreen import ensure_platform
from inferlab.engines import kernels

APP_BENCHES = {"gui": "inferlab.app.benches.gui:run_gui_bench",
               "runtime": "inferlab.app.benches.runtime:run_runtime_bench",
               "prefix": "inferlab.engines.labs.batching.prefix_bench:run_prefix_bench",
               "models": "inferlab.app.benches.models:run_models_bench",
               "traces": "inferlab.app.benches.traces:run_traces_bench"}


def benches() -> dict[str, tuple[str, tuple[str, ...]]]:
    """bench name -> (function reference, optional packages it needs)."""
    found = {spec.id: (spec.bench, spec.bench_requires) for spec in registry.LABS if spec.bench}
    return found | {name: (ref, ()) for name, ref in APP_BENCHES.items()}


def _view_benches() -> dict[str, str]:
    """lab id -> its view timings' reference (app-side figures added to its bench's)."""
    return {spec.id: spec.view_bench for spec in registry.LABS if spec.bench and spec.view_bench}


def _bench_options() -> dict[str, str]:
    """bench name -> its add_arguments reference (only benches that take options)."""
    return {spec.id: spec.bench_arguments for spec in registry.LABS
            if spec.bench and spec.bench_arguments}


def register(sub) -> None:
    names = list(benches())
    p = sub.add_parser("bench", help="run a benchmark: " + ", ".join(names) + ", or all")
    p.add_argument("lab", choices=[*names, "all"])
    p.add_argument("--json", action="store_true", help="print JSON")
    add_kernels_option(p)
    owners: dict[str, tuple[str, object]] = {}  # option dest -> (its bench, its default)
    for name, ref in _bench_options().items():
        before = {a.dest for a in p._actions}
        resolve(ref)(p.add_argument_group(f"bench {name} options"))
        owners |= {a.dest: (name, a.default) for a in p._actions if a.dest not in before}
    p.set_defaults(func=run, bench_option_owners=owners)


def _misplaced_option(args, names: list[str]) -> str | None:
    """The first option given (not at its default) that none of the benches run takes."""
    for dest, (owner, default) in getattr(args, "bench_option_owners", {}).items():
        if owner not in names and getattr(args, dest, default) != default:
            return f"--{dest.replace('_', '-')} is an option of bench {owner} only"
    return None


def _run_one(name: str, args=None) -> dict:

    ref, requires = benches()[name]
    missing = [pkg for pkg in requires if importlib.util.find_spec(pkg) is None]
    if missing:
        return {"error": f"not available: needs {', '.join(missing)} (not installed)"}
    ensure_platform()
    out = resolve(ref)(args) if name in _bench_options() else resolve(ref)()
    if name in _view_benches():
        create_application()  # the app's own QApplication, not one pyqtgraph makes and drops
        out = {**out, **resolve(_view_benches()[name])()}
    if isinstance(out, dict) and "kernels" not in out:
        # every bench names the kernel path that ran and the CPU's SIMD flags

        out["kernels"] = kernels.describe()
    return out


def run(args) -> int:
    names = list(benches()) if args.lab == "all" else [args.lab]
    misplaced = _misplaced_option(args, names)
    if misplaced:
        raise ValueError(misplaced)
    results = {}
    with CliProgress(f"bench {args.lab}") as progress:
        for i, name in enumerate(names):
            if len(names) > 1:
                progress.describe(f"bench {name}")
                progress(i / len(names), f"{i + 1} of {len(names)} benches")
            results[name] = _run_one(name, args)
    data = results if args.lab == "all" else results[args.lab]
    if args.json:
        print_json(data)
    else:
        for name, figures in results.items():
            print(f"[{name}]")
            for key, value in figures.items():
                print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    return 0
