"""`run_mcu_bench()`: the arena figures `inferlab bench mcu --json` reports, per shipped example model.

For each shipped example `.tflite` (assets/tflite), keyed by file stem:

    tflm_greedy_bytes   TFLM's own greedy plan (equals TFLM's measured head)
    best_bytes          our best placement of the same buffers
    lower_bound_bytes   largest live total over steps, stored order (no placement beats it)
    aliased_bytes       best placement after in-place aliasing (RESHAPE, element-wise ops)
    reordered_bytes     best placement in the operator order with the smallest arena
    patch_based_bytes   best placement with the first layers run patch by patch (MCUNetV2);
                        null where the model has no stage of sliding-window ops to patch
    plan_ms             time of the best plan (fastest of a few runs)
    invoke_ms           one inference in the arena interpreter with the best plan (fastest
                        of a few); null where the interpreter does not run the model

and a few more for the notes: the patch stage and grid, its recomputation, its plan and
invoke times, and why a model does not run. Sizes in bytes, times in milliseconds.
"""

from __future__ import annotations

import time
from pathlib import Path

from inferlab.engines.mcu.examples import examples_dir
from inferlab.engines.mcu.graph import Model, load_model
from inferlab.engines.mcu.inputs import random_input
from inferlab.engines.mcu.interpreter import ArenaInterpreter
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.op_costs import op_macs
from inferlab.engines.mcu.patching import patch_applicable

REPEATS = 3


def _fastest_ms(fn, repeats: int = REPEATS):
    best, result = None, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        dt = (time.perf_counter() - t0) * 1e3
        best = dt if best is None else min(best, dt)
    return round(best, 3), result


def _invoke_ms(model: Model, plan) -> tuple[float | None, str | None]:
    try:
        interp = ArenaInterpreter(model, plan)
    except ValueError as exc:  # UnsupportedOpError and friends
        return None, str(exc)
    inputs = random_input(model)
    interp.invoke(inputs)  # warm-up
    ms, _ = _fastest_ms(lambda: interp.invoke(inputs))
    return ms, None


def bench_model(model: Model) -> dict:
    """Every figure of one model."""
    greedy = plan_model(model, "tflm-greedy")
    plan_ms, best = _fastest_ms(lambda: plan_model(model, "best"))
    aliased = plan_model(model, "aliased")
    reordered = plan_model(model, "reordered")
    invoke_ms, why = _invoke_ms(model, best)
    row = {
        "tflm_greedy_bytes": greedy.arena_bytes,
        "best_bytes": best.arena_bytes,
        "lower_bound_bytes": best.lower_bound_bytes,
        "aliased_bytes": aliased.arena_bytes,
        "reordered_bytes": reordered.arena_bytes,
        "patch_based_bytes": None,
        "plan_ms": plan_ms,
        "invoke_ms": invoke_ms,
        "aliases": len(aliased.aliases),
        "reordered_changes_order": reordered.op_order != tuple(range(len(model.operators))),
    }
    if why is not None:
        row["invoke_unsupported"] = why
    if patch_applicable(model):
        patch_ms, patched = _fastest_ms(lambda: plan_model(model, "patch-based"), 1)
        stage = patched.patch
        model_macs = sum(op_macs(model, i) for i in range(len(model.operators))) or 1
        row |= {
            "patch_based_bytes": patched.arena_bytes,
            "patch_based_ratio_to_tflm": round(patched.arena_bytes / greedy.arena_bytes, 4),
            "patch_stage_ops": [stage.ops[0], stage.ops[-1]],
            "patch_grid": list(stage.grid),
            "patch_stage_mac_overhead": round(stage.mac_overhead, 4),
            "patch_extra_macs": stage.macs - stage.plain_macs,
            "patch_model_mac_overhead": round((stage.macs - stage.plain_macs) / model_macs, 4),
            "patch_plan_ms": patch_ms,
            "patch_invoke_ms": _invoke_ms(model, patched)[0] if why is None else None,
        }
    return row


def run_mcu_bench(models_dir: str | Path | None = None) -> dict:
    """`{"models": {stem: figures}}` for every shipped example `.tflite` (or those in a folder)."""
    folder = Path(models_dir) if models_dir is not None else examples_dir()
    paths = sorted(folder.glob("*.tflite")) if folder.is_dir() else []
    models = {p.stem: bench_model(load_model(p)) for p in paths}
    return {"models": models, "models_dir": str(folder)}
