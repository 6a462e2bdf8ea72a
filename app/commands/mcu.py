"""`inferlab mcu`: plan a model's arena and run it in that one arena, headless.

    inferlab mcu plan MODEL.tflite [--planner P] [--json]
    inferlab mcu invoke MODEL.tflite --input IN.npy --output OUT.npy [--planner P] [--json]
    inferlab mcu reorder MODEL.tflite --output OUT.tflite [--json]

P is a buffer planner (linear, tflm-greedy, best) or a model-level one that changes the
buffers first (aliased, reordered, patch-based); see `engines.mcu.model_planners.planner_names`.
`reorder` writes the model with its operators stored in the memory-saving order, so that
TFLM itself (which runs stored order) runs that schedule.
"""

from __future__ import annotations

import time

from inferlab.app.cli import print_json
from inferlab.engines.mcu.examples import model_argument
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.interpreter import ArenaInterpreter
from inferlab.engines.mcu.model_planners import plan_model, planner_names
from inferlab.engines.mcu.reorder import write_reordered

DEFAULT_PLANNER = "tflm-greedy"


def register(sub) -> None:

    names = ", ".join(planner_names())
    p = sub.add_parser("mcu", help="microcontroller arenas: plan a .tflite model, run it")
    actions = p.add_subparsers(dest="mcu_action", metavar="ACTION", required=True)

    plan = actions.add_parser("plan", help="plan the tensor arena (per-tensor offsets)")
    plan.add_argument("model", metavar="MODEL.tflite", type=model_argument,
                      help=".tflite model file, or a shipped example's name (person_detect)")
    plan.add_argument("--planner", default=DEFAULT_PLANNER,
                      help=f"one of {names} (default {DEFAULT_PLANNER})")  # fmt: skip
    plan.add_argument("--json", action="store_true", help="print JSON")

    inv = actions.add_parser("invoke", help="run the arena interpreter on one input")
    inv.add_argument("model", metavar="MODEL.tflite", type=model_argument,
                      help=".tflite model file, or a shipped example's name (person_detect)")
    inv.add_argument("--input", required=True, action="append", metavar="IN.npy",
                     help="input tensor (.npy, the shape and dtype of the model's input); "
                          "repeat for a model with several inputs")  # fmt: skip
    inv.add_argument("--output", required=True, action="append", metavar="OUT.npy",
                     help="where to write the output (.npy); repeat for several outputs")  # fmt: skip
    inv.add_argument("--planner", default=DEFAULT_PLANNER,
                     help=f"one of {names} (default {DEFAULT_PLANNER})")  # fmt: skip
    inv.add_argument("--json", action="store_true", help="print JSON")

    reo = actions.add_parser("reorder", help="write the model with its operators reordered "
                                             "for the smallest arena")  # fmt: skip
    reo.add_argument("model", metavar="MODEL.tflite", type=model_argument,
                      help=".tflite model file, or a shipped example's name (person_detect)")
    reo.add_argument("--output", required=True, metavar="OUT.tflite", help="file to write")
    reo.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    return {"plan": _plan, "invoke": _invoke, "reorder": _reorder}[args.mcu_action](args)


def _load(path: str):

    return load_model(path)


def _plan(args) -> int:

    model = _load(args.model)
    t0 = time.perf_counter()
    plan = plan_model(model, args.planner)
    plan_ms = (time.perf_counter() - t0) * 1e3
    data = {"model": model.name, "path": args.model, "operators": len(model.operators)}
    data |= plan.to_dict() | {"plan_ms": round(plan_ms, 3)}
    if args.json:
        print_json(data)
        return 0
    print(f"{model.name}: {args.planner} plan, arena {plan.arena_bytes:,} B "
          f"(lower bound {plan.lower_bound_bytes:,} B), {len(plan.buffers)} buffers, "
          f"planned in {plan_ms:.1f} ms")  # fmt: skip
    if plan.op_order is not None:
        print(f"  operator order: {list(plan.op_order)}")
    if plan.aliases:
        print("  aliases: " + ", ".join(f"t{t} -> t{o}" for t, o in plan.aliases))
    if plan.patch is not None:
        s = plan.patch
        print(f"  patch stage: operators {s.ops[0]}..{s.ops[-1]}, {s.grid[0]} x {s.grid[1]} "
              f"patches, {s.macs:,} MACs ({s.mac_overhead:+.0%} of the stage's {s.plain_macs:,})")  # fmt: skip
    print(f"  {'offset':>8} {'size':>8} {'first':>5} {'last':>5}  name")
    for b, o in sorted(
        zip(plan.buffers, plan.offsets, strict=True), key=lambda bo: (bo[1], bo[0].first)
    ):
        print(f"  {o:>8,} {b.size:>8,} {b.first:>5} {b.last:>5}  {b.name}")
    return 0


def _invoke(args) -> int:
    import numpy as np


    model = _load(args.model)
    if len(args.input) != len(model.inputs):
        raise ValueError(
            f"{model.name} takes {len(model.inputs)} input(s); got {len(args.input)} --input"
        )
    if len(args.output) > len(model.outputs):
        raise ValueError(
            f"{model.name} has {len(model.outputs)} output(s); got {len(args.output)} --output"
        )
    plan = plan_model(model, args.planner)
    interp = ArenaInterpreter(model, plan)
    inputs = []
    for k, path in enumerate(args.input):
        arr = np.load(path, allow_pickle=False)
        if not isinstance(arr, np.ndarray):
            raise ValueError(f"{path}: an .npz archive; --input takes one .npy array")
        t = model.tensors[model.inputs[k]]
        if tuple(arr.shape) != tuple(t.shape):
            raise ValueError(f"{path} has shape {list(arr.shape)}; {model.name}'s input {k} "
                             f"({t.name!r}) is {t.dtype} {list(t.shape)}")  # fmt: skip
        inputs.append(arr)
    t0 = time.perf_counter()
    result = interp.invoke(inputs)
    invoke_ms = (time.perf_counter() - t0) * 1e3
    outputs = result if isinstance(result, tuple) else (result,)
    for path, out in zip(args.output, outputs, strict=False):
        np.save(path, out, allow_pickle=False)
    data = {
        "model": model.name,
        "planner": args.planner,
        "arena_bytes": plan.arena_bytes,
        "invoke_ms": round(invoke_ms, 3),
        "outputs": [
            {"path": path, "shape": list(out.shape), "dtype": str(out.dtype)}
            for path, out in zip(args.output, outputs, strict=False)
        ],
        "op_times_ms": [round(t * 1e3, 4) for t in interp.last_op_times_s],
    }
    if args.json:
        print_json(data)
        return 0
    print(f"{model.name}: ran in a {plan.arena_bytes:,}-byte arena ({args.planner}) "
          f"in {invoke_ms:.1f} ms")  # fmt: skip
    for o in data["outputs"]:
        print(f"  wrote {o['dtype']} {o['shape']} to {o['path']}")
    return 0


def _reorder(args) -> int:

    with open(args.model, "rb") as f:
        raw = f.read()
    model = _load(args.model)
    stored = plan_model(model, "tflm-greedy")
    plan = plan_model(model, "reordered")
    data = write_reordered(raw, plan.op_order)
    with open(args.output, "wb") as f:
        f.write(data)
    again = plan_model(_load(args.output), "tflm-greedy")
    out = {
        "model": model.name,
        "output": args.output,
        "op_order": list(plan.op_order),
        "changed": plan.op_order != tuple(range(len(model.operators))),
        "tflm_greedy_bytes": stored.arena_bytes,
        "reordered_tflm_greedy_bytes": again.arena_bytes,
        "reordered_best_bytes": plan.arena_bytes,
    }
    if args.json:
        print_json(out)
        return 0
    what = "new order" if out["changed"] else "stored order kept (no order needs less)"
    print(f"{model.name}: {what}; TFLM greedy arena {stored.arena_bytes:,} B -> "
          f"{again.arena_bytes:,} B; wrote {args.output}")  # fmt: skip
    return 0
