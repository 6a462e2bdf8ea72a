"""`inferlab run LAB ...`: run one lab's engines headless, and write its snapshot if asked.

    inferlab run mcu [--model M.tflite] [--planner P] [--compare P2|none] [--board ID]
                     [--seed N] [--snapshot F] [--json]
    inferlab run kv [--model M] [--scenario NAME] [--block-size N] [--blocks N]
                    [--device D] [--max-steps N] [--snapshot F] [--json]

Every lab whose registry entry names `run_arguments` and `run` gets a sub-command. A lab's
run function gets (args, trace recorder) and returns (section, summary dict); this module
writes the snapshot, which File ▸ Open and `inferlab screenshot --snapshot F --lab LAB`
show read-only. `args.progress(fraction, message)` is there for the run function to report
to: a bar on stderr when it is a terminal (app/cli_progress.py), nothing otherwise.
"""

from __future__ import annotations

from inferlab.app import __version__
from inferlab.app.about import host_facts
from inferlab.app.cli import add_kernels_option, print_json
from inferlab.app.cli_progress import CliProgress
from inferlab.app.labs import registry
from inferlab.app.labs.registry import lab_spec, resolve
from inferlab.app.snapshot_io import save
from inferlab.engines.hardware.discovery import discover_devices
from inferlab.engines.trace.recorder import TraceRecorder
from inferlab.engines.trace.snapshot import make_snapshot


def _runnable():
    return [spec for spec in registry.LABS if spec.run is not None]


def register(sub) -> None:
    runnable = _runnable()
    p = sub.add_parser("run", help="run a lab headless and write its snapshot: "
                       + ", ".join(spec.id for spec in runnable))
    labs = p.add_subparsers(dest="lab", metavar="LAB", required=True)
    for spec in runnable:
        lp = labs.add_parser(spec.id, help=f"run the {spec.title} lab")
        resolve(spec.run_arguments)(lp)
        lp.add_argument("--snapshot", metavar="F.json",
                        help="write the snapshot here (opens in InferLab and Perfetto); "
                             "without it the run prints its figures only")
        lp.add_argument("--json", action="store_true", help="print the lab's metrics as JSON")
        add_kernels_option(lp)
    p.set_defaults(func=run)


def run(args) -> int:

    lab_run = resolve(lab_spec(args.lab).run)
    recorder = TraceRecorder()
    with CliProgress(f"run {args.lab}") as progress:
        args.progress = progress
        section, summary = lab_run(args, recorder)
        path = None
        if args.snapshot:
            progress(None, "writing the snapshot")
            snapshot = make_snapshot(app_version=__version__, host=host_facts(),
                                     devices=[d.to_dict() for d in discover_devices()],
                                     labs={args.lab: section}, trace_events=recorder.events(),
                                     active_lab=args.lab)
            path = save(args.snapshot, snapshot)
    if args.json:
        print_json({"snapshot": None if path is None else str(path), "lab": args.lab,
                    "metrics": summary})
    else:
        if path is not None:
            print(path)
        print_summary(summary)
    return 0


MAX_LIST_LINES = 20


def _text(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return f"({len(value)} values)"
    if isinstance(value, dict):
        return " · ".join(f"{k} {_text(v)}" for k, v in value.items())
    return str(value)


def print_summary(summary: dict) -> None:
    """The summary for a reader: numbers to 4 digits, a dict on one line, a list of records
    one line each (the first MAX_LIST_LINES; --json prints everything)."""
    for key, value in summary.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            print(f"  {key}: {len(value)}")
            for item in value[:MAX_LIST_LINES]:
                print("    " + "  ".join(f"{k}={_text(v)}" for k, v in item.items()))
            if len(value) > MAX_LIST_LINES:
                print(f"    … {len(value) - MAX_LIST_LINES} more (--json prints them all)")
        else:
            print(f"  {key}: {_text(value)}")
