"""`inferlab run LAB ...`: run one lab's engines headless and write its snapshot.

    inferlab run mcu [--model M.tflite] [--planner P] [--compare P2|none] [--board ID]
                     [--seed N] --snapshot F [--json]
    inferlab run kv [--model M] [--scenario NAME] [--block-size N] [--blocks N]
                    [--device D] [--max-steps N] --snapshot F [--json]

Each lab registers its own sub-parser in `LABS`: lab id → (add_arguments, run). A lab's
run function gets (args, trace recorder) and returns (section, summary dict); this module
writes the snapshot, which File ▸ Open and `inferlab screenshot --snapshot F --lab LAB`
show read-only.
Later labs add `run kv`, `run batching` the same way.
"""

from __future__ import annotations

from inferlab.app import __version__
from inferlab.app.cli import print_json, tflite_model
from inferlab.engines.kvlab.section import KV_DEFAULTS, kv_run, kv_section, kv_trace_step
from inferlab.engines.mculab.section import (
    MCU_DEFAULTS,
    MCU_NO_COMPARE,
    mcu_host_run,
    mcu_op_spans,
    mcu_planner_names,
    mcu_planners,
    mcu_plans,
    mcu_section,
    mcu_state,
    mcu_with_runs,
)


# mcu ----------------------------------------------------------------------------------------
def _mcu_arguments(p) -> None:
    from inferlab.engines.mcu.examples import default_model

    p.add_argument("--model", type=tflite_model, default=str(default_model()),
                   help=".tflite model file, or a shipped example's name (default person_detect)")
    p.add_argument("--planner", default=MCU_DEFAULTS["planner"],
                   help="arena planner: linear, tflm-greedy, best, aliased, reordered, "
                        "patch-based (default tflm-greedy)")
    p.add_argument("--compare", default=MCU_DEFAULTS["compare"],
                   help="second planner drawn beside it, or 'none' (default "
                        f"{MCU_DEFAULTS['compare']}; one that does not apply to the "
                        "model is noted in the snapshot)")
    p.add_argument("--board", default=MCU_DEFAULTS["board"],
                   help="board preset id for the budget and cycle estimates (default nrf52840)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")


def _run_mcu(args, recorder):
    """Plan the model, check it against the board, run it on the host interpreter."""
    from pathlib import Path

    from inferlab.engines.mcu.boards import load_board
    from inferlab.engines.mcu.graph import load_model
    from inferlab.engines.mcu.interpreter import UnsupportedOpError, check_supported
    for name, value in (("--planner", args.planner), ("--compare", args.compare)):
        allowed = mcu_planner_names() + ([MCU_NO_COMPARE] if name == "--compare" else [])
        if value not in allowed:
            raise ValueError(f"{name} {value!r}: expected one of {', '.join(allowed)}")
    path = str(Path(args.model).resolve())
    board = load_board(args.board)
    with recorder.span("load model", cat="mcu", args={"path": path}):
        model = load_model(path)
    settings = dict(MCU_DEFAULTS, model=path, planner=args.planner, compare=args.compare,
                    board=board.id, seed=args.seed)
    with recorder.span("plan", cat="mcu", args={"planners": mcu_planners(settings)}):
        plans, compare_note = mcu_plans(model, settings)
    note = ""
    try:
        check_supported(model)
    except UnsupportedOpError as exc:
        note = f"Runs unavailable: {exc}"
    state = mcu_state(model, path, board, plans, note, compare_note)
    if not note:
        with recorder.span("run on host", cat="mcu", args={"seed": args.seed}):
            run, _outputs = mcu_host_run(model, plans[0][0], args.seed)
        state = mcu_with_runs(state, host_run=run)
        mcu_op_spans(recorder, state)
    section = mcu_section(settings, state)
    return section, section["metrics"]


# kv -----------------------------------------------------------------------------------------
def _kv_arguments(p) -> None:
    from inferlab.engines.kvlab.scenarios import SCENARIO_NAMES

    p.add_argument("--model", default=KV_DEFAULTS["model"],
                   help="auto (SmolLM2-135M when installed, else tiny), smollm2-135m, tiny, or "
                        "a .gguf file / Hugging Face folder (default auto)")
    p.add_argument("--scenario", default=KV_DEFAULTS["scenario"],
                   help=f"{', '.join(SCENARIO_NAMES)} (default {KV_DEFAULTS['scenario']})")
    p.add_argument("--block-size", type=int, default=KV_DEFAULTS["block_size"],
                   help="tokens per KV block (default 16)")
    p.add_argument("--blocks", type=int, default=0,
                   help="blocks in the pool (default: sized from the scenario's requests)")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="stop after this many steps (default: run the scenario to its end)")


def _run_kv(args, recorder):
    """Run a KV scenario to its end (real model, paged cache, contiguous beside it)."""
    from inferlab.engines.kvlab.scenarios import get_scenario

    get_scenario(args.scenario)  # unknown name: ValueError listing the scenarios
    if args.block_size < 1:
        raise ValueError(f"--block-size must be at least 1, got {args.block_size}")
    if args.blocks < 0:
        raise ValueError(f"--blocks must not be negative, got {args.blocks}")
    settings = dict(KV_DEFAULTS, model=args.model, scenario=args.scenario,
                    block_size=args.block_size, n_blocks=args.blocks)
    with recorder.span("load model and prepare", cat="kv", args={"model": args.model}):
        from inferlab.engines.kvlab.models import load_lab_model

        load_lab_model(args.model, args.device)
    session, records = kv_run(settings, args.device, args.max_steps,
                                       on_step=lambda r: kv_trace_step(recorder, r))
    section = kv_section(settings, session.info, session.seq_infos(), records)
    return section, section["metrics"]


# lab id -> (add its arguments, run it). Each run returns (section, summary).
LABS = {
    "mcu": (_mcu_arguments, _run_mcu),
    "kv": (_kv_arguments, _run_kv),
}


def register(sub) -> None:
    p = sub.add_parser("run", help="run a lab headless and write its snapshot: " + ", ".join(LABS))
    labs = p.add_subparsers(dest="lab", metavar="LAB", required=True)
    for lab_id, (add_arguments, _run) in LABS.items():
        lp = labs.add_parser(lab_id, help=f"run the {lab_id} lab")
        add_arguments(lp)
        lp.add_argument("--snapshot", required=True, metavar="F.json",
                        help="write the snapshot here (opens in InferLab and Perfetto)")
        lp.add_argument("--json", action="store_true", help="print the lab's metrics as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from inferlab.app.about import host_facts
    from inferlab.app.snapshot_io import save
    from inferlab.engines.hardware.discovery import discover_devices
    from inferlab.engines.trace.recorder import TraceRecorder
    from inferlab.engines.trace.snapshot import make_snapshot

    _add, lab_run = LABS[args.lab]
    recorder = TraceRecorder()
    section, summary = lab_run(args, recorder)
    snapshot = make_snapshot(app_version=__version__, host=host_facts(),
                             devices=[d.to_dict() for d in discover_devices()],
                             labs={args.lab: section}, trace_events=recorder.events(),
                             active_lab=args.lab)
    path = save(args.snapshot, snapshot)
    if args.json:
        print_json({"snapshot": str(path), "lab": args.lab, "metrics": summary})
    else:
        print(path)
        for key, value in summary.items():
            print(f"  {key}: {value}")
    return 0
