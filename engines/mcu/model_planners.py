"""Planning a model by planner name: the buffer planners or the model-level ones.

The buffer planners (`planners.PLANNERS`: linear, tflm-greedy, best) see only TFLM's buffers.
The model-level planners change the buffers themselves before placing them with `plan_best`,
so they need the model, not a buffer list: in-place aliasing (`aliasing`), operator
reordering (`reorder`) and patch-based execution (`patching`). `plan_model` runs either kind
by name; `ArenaInterpreter` runs every plan it returns.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from inferlab.engines.mcu.aliasing import plan_aliased
from inferlab.engines.mcu.graph import Model, load_model
from inferlab.engines.mcu.lifetimes import model_buffers
from inferlab.engines.mcu.patching import plan_patch_based
from inferlab.engines.mcu.plan import Plan
from inferlab.engines.mcu.planners import PLANNERS, plan_buffers
from inferlab.engines.mcu.reorder import plan_reordered

# name -> fn(model) -> Plan
MODEL_PLANNERS: dict[str, Callable[[Model], Plan]] = {
    "aliased": plan_aliased,
    "reordered": plan_reordered,
    "patch-based": plan_patch_based,
}


def planner_names() -> tuple[str, ...]:
    """Every name `plan_model` takes: the buffer planners, then the model-level ones."""
    return (*PLANNERS, *MODEL_PLANNERS)


def plan_model(
    model_or_path: Model | str | os.PathLike | bytes, planner: str = "tflm-greedy"
) -> Plan:
    """Plan subgraph 0 of a model (a `Model`, a `.tflite` path or its bytes) with a buffer
    planner (`PLANNERS`) or a model-level one (`MODEL_PLANNERS`)."""
    model = model_or_path if isinstance(model_or_path, Model) else load_model(model_or_path)
    if planner in MODEL_PLANNERS:
        return MODEL_PLANNERS[planner](model)
    if planner not in PLANNERS:
        raise ValueError(
            f"unknown planner {planner!r}; expected one of {', '.join(planner_names())}"
        )
    return plan_buffers(model_buffers(model), planner)
