"""`inferlab run mcu`: plan a model, check it against a board, run it on the host interpreter.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from pathlib import Path

from inferlab.engines.board.boards import load_board
from inferlab.engines.labs.mcu.section import mcu_section
from inferlab.engines.labs.mcu.session import (
    mcu_host_run,
    mcu_op_spans,
    mcu_plans,
    mcu_state,
    mcu_with_runs,
)
from inferlab.engines.labs.mcu.settings import (
    MCU_DEFAULTS,
    MCU_NO_COMPARE,
    mcu_planner_names,
    mcu_planners,
)
from inferlab.engines.mcu.examples import default_model, model_argument
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.interpreter import UnsupportedOpError, check_supported


def add_arguments(p) -> None:
    p.add_argument("--model", type=model_argument, default=str(default_model()),
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


def run(args, recorder):
    """Plan the model, check it against the board, run it on the host interpreter."""
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
