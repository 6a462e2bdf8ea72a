"""What the MCU lab computes from engine objects, without Qt: plans and their arena
layouts, the per-op table, host runs, the state record that holds them, and the host run's
trace spans. The lab and `inferlab run mcu` both build their state here, so that they write
the same section."""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from inferlab.engines.board.boards import fit_check
from inferlab.engines.labs.mcu.records import (
    GRAPH_INPUT,
    SCRATCH,
    ArenaLayout,
    ArenaTensor,
    McuState,
    OpRow,
    RunRecord,
)
from inferlab.engines.labs.mcu.settings import MCU_HOST_REPEATS, mcu_planners
from inferlab.engines.mcu.inputs import random_input
from inferlab.engines.mcu.interpreter import ArenaInterpreter
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.op_costs import op_macs


def mcu_plan(model, planner: str):
    """(Plan, milliseconds it took) for one planner of `engines.mcu.model_planners.planner_names`."""
    t0 = time.perf_counter()
    plan = plan_model(model, planner)
    return plan, (time.perf_counter() - t0) * 1e3


def mcu_step_labels(model, plan) -> tuple:
    """What runs at each step: the plan's own labels, else "OP#i" in its execution order."""
    labels = getattr(plan, "step_labels", None)
    if labels:
        return tuple(labels)
    order = getattr(plan, "op_order", None)
    order = range(len(model.operators)) if order is None else order
    return ("inputs", *(f"{model.operators[i].op}#{i}" for i in order))


def _label_op(label: str) -> int | None:
    """The operator index at the end of a step label ("patch 2: CONV_2D#4" → 4)."""
    head, sep, tail = label.rpartition("#")
    return int(tail) if sep and tail.isdigit() else None


def mcu_layout(model, plan, plan_ms: float = 0.0):
    """An ArenaLayout: the plan's buffers with their tensors' shape, dtype and producer.

    Works for every planner: in-place aliases are named, patch tiles are coloured by the op
    that writes them, and steps carry what runs at each (reordered, patch-based plans).
    """
    labels = mcu_step_labels(model, plan)
    step_op = [_label_op(label) for label in labels]
    producer = {t: op.index for op in model.operators for t in op.outputs}
    aliases = dict(getattr(plan, "aliases", ()) or ())
    patch = getattr(plan, "patch", None)
    tile_op = {tile.buffer: tile.op for tile in patch.tiles if tile.buffer is not None} if patch else {}
    tensors = []
    for index, (buf, offset) in enumerate(zip(plan.buffers, plan.offsets, strict=True)):
        if buf.tensor is not None and 0 <= buf.tensor < len(model.tensors):
            t = model.tensors[buf.tensor]
            op = producer.get(buf.tensor)
            kind = model.operators[op].op if op is not None else GRAPH_INPUT
            onto = aliases.get(buf.tensor)
            alias = model.tensors[onto].name if onto is not None else ""
            tensors.append(ArenaTensor(buf.name, buf.size, offset, buf.first, buf.last,
                                       buf.tensor, tuple(t.shape), t.dtype, op, kind, alias))
        elif index in tile_op:  # one patch's part of a tensor that is never whole
            op = tile_op[index]
            out = model.tensors[model.operators[op].outputs[0]]
            tensors.append(ArenaTensor(buf.name, buf.size, offset, buf.first, buf.last,
                                       None, (), out.dtype, op, model.operators[op].op))
        else:  # a kernel's scratch buffer: the op running at its step
            op = step_op[buf.first] if 0 <= buf.first < len(step_op) else None
            kind = SCRATCH if op is not None or "scratch" in buf.name else GRAPH_INPUT
            tensors.append(ArenaTensor(buf.name, buf.size, offset, buf.first, buf.last,
                                       None, (), "", op, kind))
    steps = max([len(labels)] + [b.last + 1 for b in plan.buffers])
    stored = labels == ("inputs", *(f"{op.op}#{op.index}" for op in model.operators))
    return ArenaLayout(plan.planner, plan.arena_bytes, plan.lower_bound_bytes, steps,
                       tuple(tensors), tuple(plan.high_water_by_step()), round(plan_ms, 3),
                       labels, stored)


def mcu_op_rows(model, board, host_us=None, board_us=None) -> tuple:
    """One OpRow per operator: output shape, MACs (`op_macs`), cycles = MACs × cycles/MAC."""
    rows = []
    for op in model.operators:
        macs = op_macs(model, op.index)
        cycles = board.cycles_for(macs)
        shape = tuple(model.tensors[op.outputs[0]].shape) if op.outputs else ()
        rows.append(OpRow(op.index, op.op, shape, macs, cycles, cycles / board.clock_hz * 1e6,
                          host_us[op.index] if host_us else None,
                          board_us[op.index] if board_us else None))
    return tuple(rows)



def mcu_plans(model, settings: dict):
    """([(Plan, ms)], compare_note): the chosen plan (a failure raises ValueError), then the
    compared one, or the reason it has none (a planner that does not apply to this model)."""
    names = mcu_planners(settings)
    plans = [mcu_plan(model, names[0])]
    note = ""
    for name in names[1:]:
        try:
            plans.append(mcu_plan(model, name))
        except ValueError as exc:
            note = f"{name}: {exc}"
    return plans, note


def mcu_board_plan(plan):
    """The plan to send a board with PLAN, or None to let it plan itself: the wire protocol
    carries offsets for TFLM's own buffers only (no reordering, aliasing or patches)."""
    plain = (getattr(plan, "op_order", None) is None and not getattr(plan, "aliases", ())
             and getattr(plan, "patch", None) is None)
    return plan if plain else None



def mcu_state(model, path, board, plans, note: str = "", compare_note: str = ""):
    """The McuState of `model` (loaded from `path`) on `board`; `plans`: (Plan, ms) pairs,
    the chosen planner's first (its arena is the one checked against the board)."""
    layouts = tuple(mcu_layout(model, plan, ms) for plan, ms in plans)
    file_bytes = os.path.getsize(path) if path and os.path.isfile(path) else 0
    return McuState(model=model.name, model_path=str(path), model_file_bytes=file_bytes,
                    n_operators=len(model.operators), board=board, layouts=layouts,
                    fit=fit_check(layouts[0].arena_bytes, file_bytes, board),
                    ops=mcu_op_rows(model, board), note=note, compare_note=compare_note)


def mcu_host_run(model, plan, seed: int = 0, repeats: int = MCU_HOST_REPEATS, should_stop=None):
    """Run the arena interpreter on the seeded random input: (RunRecord, the outputs).

    One warm-up invocation, then `repeats`; per-op times are the best (smallest) of the
    repeats, in µs: other threads and processes only ever slow an op down.
    Raises UnsupportedOpError naming the op the interpreter lacks.
    """

    interp = ArenaInterpreter(model, plan)
    inputs = random_input(model, seed)
    out = interp.invoke(inputs)
    per_op, totals = [], []
    for _ in range(max(1, repeats)):
        if should_stop is not None and should_stop():
            break
        interp.invoke(inputs)
        per_op.append(interp.last_op_times_s)
        totals.append(sum(interp.last_op_times_s))
    op_us = tuple(float(v) * 1e6 for v in np.min(np.asarray(per_op), axis=0))
    first = out[0] if isinstance(out, tuple) else out
    run = RunRecord("host", seed, float(np.min(totals)) * 1e6, op_us, tuple(first.ravel().tolist()),
                    tuple(first.shape), str(first.dtype), len(per_op), plan.arena_bytes)
    return run, (list(out) if isinstance(out, tuple) else [out])


def mcu_with_runs(state, host_run=None, board_run=None):
    """`state` with a host and/or board run recorded and their per-op times in the table."""
    host_run = host_run or state.host_run
    board_run = board_run or state.board_run
    ops = tuple(dataclasses.replace(
        row,
        host_us=host_run.op_us[row.index] if host_run and row.index < len(host_run.op_us) else None,
        board_us=board_run.op_us[row.index] if board_run and row.index < len(board_run.op_us) else None)
        for row in state.ops)
    return dataclasses.replace(state, ops=ops, host_run=host_run, board_run=board_run)


def mcu_op_spans(recorder, state) -> None:
    """The last host run's per-op times as back-to-back trace spans ending now (Perfetto).

    They are the best of the repeats, laid end to end: one invocation as it would look.
    """
    if state.host_run is None:
        return
    start = recorder.now_s() - sum(o.host_us or 0.0 for o in state.ops) / 1e6
    for row in state.ops:
        dur = (row.host_us or 0.0) / 1e6
        recorder.add_span(f"{row.index} {row.op}", start, start + dur, cat="mcu op",
                          args={"macs": row.macs, "est_cycles": row.est_cycles})
        start += dur
