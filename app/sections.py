"""Each lab's snapshot section, built and read without Qt (the CLI writes them too).

A section is {"settings": {...}, "state": {...}, "metrics": {...}}. Builders take engine
records; readers turn a section back into those records and raise ValueError naming the
field that is wrong.
"""

from __future__ import annotations

from inferlab.engines.hardware.microbench import MeasuredPoint, MeasuredRoofs
from inferlab.engines.hardware.telemetry import TelemetryHistory
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.memory import attention_variants, plan_memory
from inferlab.engines.trace.snapshot import lab_section as section

MEMORY_DEFAULTS = {"model": "llama-3-8b", "context": 8192, "batch": 1, "weight_dtype": "fp16",
                   "kv_dtype": "fp16", "target": "h100-sxm", "utilization": 0.9}
ROOFLINE_DEFAULTS = {"dtype": "fp32", "presets": [], "model": "smollm2-135m", "context": 1024,
                     "weight_dtype": "fp32", "kv_dtype": "fp32"}


def _get(mapping: dict, key: str, where: str):
    if not isinstance(mapping, dict) or key not in mapping:
        raise ValueError(f"{where}: missing field {key!r}")
    return mapping[key]


# hardware ----------------------------------------------------------------------------------------
def hardware_section(settings: dict, devices, history: TelemetryHistory | None, roofs: dict) -> dict:
    """`roofs`: device id → MeasuredRoofs."""
    metrics = {dev: r.to_dict() for dev, r in roofs.items()}
    state = {"devices": [d.to_dict() for d in devices],
             "telemetry": history.to_dict() if history is not None else None,
             "roofs": metrics}
    return section(settings, state, {"roofs": metrics})


def read_hardware_section(sec: dict) -> tuple[list[dict], TelemetryHistory | None, dict]:
    state = _get(sec, "state", "labs.hardware")
    devices = _get(state, "devices", "labs.hardware.state")
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise ValueError("labs.hardware.state.devices: expected a list of objects")
    raw = state.get("telemetry")
    history = TelemetryHistory.from_dict(raw) if raw else None
    roofs = {dev: MeasuredRoofs.from_dict(r) for dev, r in (state.get("roofs") or {}).items()}
    return devices, history, roofs


# roofline ----------------------------------------------------------------------------------------
def roofline_section(settings: dict, roofs: MeasuredRoofs | None, points, model_config=None) -> dict:
    state = {"roofs": roofs.to_dict() if roofs is not None else None,
             "measured_points": [p.to_dict() for p in points],
             "model_config": model_config.to_dict() if model_config is not None else None}
    metrics = {}
    if roofs is not None:
        metrics = {"peak_flops": dict(roofs.peak_flops),
                   "bandwidth_bytes_per_s": roofs.bw_bytes_per_s,
                   "knee_flops_per_byte": {k: v / roofs.bw_bytes_per_s for k, v in roofs.peak_flops.items()}}
    return section(settings, state, metrics)


def read_roofline_section(sec: dict):
    settings = _get(sec, "settings", "labs.roofline")
    state = _get(sec, "state", "labs.roofline")
    raw = state.get("roofs")
    roofs = MeasuredRoofs.from_dict(raw) if raw else None
    points = [MeasuredPoint.from_dict(p) for p in state.get("measured_points") or []]
    cfg_raw = state.get("model_config")
    cfg = ModelConfig.from_dict(cfg_raw) if cfg_raw else None
    return dict(ROOFLINE_DEFAULTS) | dict(settings), roofs, points, cfg


# memory ----
def preset_target(preset) -> dict:
    """A hardware preset as a memory-lab target."""
    return {"id": preset.id, "label": preset.name,
            "memory_bytes": preset.memory_bytes, "bw_bytes_per_s": preset.bandwidth_bytes_per_s}


def memory_plans(settings: dict, cfg: ModelConfig, target: dict):
    """The plan for the settings, and the MHA/GQA/MQA variants' (config, plan) beside it."""
    kwargs = dict(context=int(settings["context"]), batch=int(settings["batch"]),
                  weight_dtype=settings["weight_dtype"], kv_dtype=settings["kv_dtype"],
                  device_memory_bytes=int(target["memory_bytes"]),
                  utilization=float(settings["utilization"]),
                  bw_bytes_per_s=target.get("bw_bytes_per_s"))
    plan = plan_memory(cfg, **kwargs)
    variants = {kind: (vcfg, plan_memory(vcfg, **kwargs)) for kind, vcfg in attention_variants(cfg).items()}
    return plan, variants



def memory_section(settings: dict, model_config: ModelConfig, plan, target: dict) -> dict:
    """`target`: {"id", "label", "memory_bytes", "bw_bytes_per_s"} of the chosen device."""
    state = {"model_config": model_config.to_dict(), "target": target, "plan": plan.to_dict()}
    metrics = {k: plan.to_dict()[k] for k in ("kv_bytes_per_token", "kv_bytes_total", "weight_bytes",
                                              "total_bytes", "max_batch", "max_context")}
    return section(settings, state, metrics)


def read_memory_section(sec: dict) -> tuple[dict, ModelConfig, dict]:
    settings = _get(sec, "settings", "labs.memory")
    state = _get(sec, "state", "labs.memory")
    cfg = ModelConfig.from_dict(_get(state, "model_config", "labs.memory.state"))
    target = _get(state, "target", "labs.memory.state")
    for key in ("label", "memory_bytes"):
        _get(target, key, "labs.memory.state.target")
    return dict(MEMORY_DEFAULTS) | dict(settings), cfg, target


# mcu ---------------------------------------------------------------------------------------------
# The MCU lab's records are built here from engine objects, without Qt, so that the lab and
# `inferlab run mcu` write the same section. `model` is the model file's path; "" means the
# default shipped example (engines/mcu/examples.py).
MCU_DEFAULTS = {"model": "", "planner": "tflm-greedy", "compare": "patch-based", "board": "nrf52840",
                "seed": 0, "y_to_sram": False}
MCU_NO_COMPARE = "none"
MCU_HOST_REPEATS = 5  # host runs: one warm-up, then the best of this many invocations


def mcu_plan(model, planner: str):
    """(Plan, milliseconds it took) for one planner of `engines.mcu.planners.PLANNERS`."""
    import time

    from inferlab.engines.mcu.planners import plan_model

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
    from inferlab.views.mcu_records import GRAPH_INPUT, SCRATCH, ArenaLayout, ArenaTensor

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
    from inferlab.engines.mcu.interpreter import op_macs
    from inferlab.views.mcu_records import OpRow

    rows = []
    for op in model.operators:
        macs = op_macs(model, op.index)
        cycles = board.cycles_for(macs)
        shape = tuple(model.tensors[op.outputs[0]].shape) if op.outputs else ()
        rows.append(OpRow(op.index, op.op, shape, macs, cycles, cycles / board.clock_hz * 1e6,
                          host_us[op.index] if host_us else None,
                          board_us[op.index] if board_us else None))
    return tuple(rows)


def mcu_planner_names() -> list[str]:
    """Every planner the engines offer: TFLM-style buffer planners, then model-level ones."""
    from inferlab.engines.mcu import planners

    names = getattr(planners, "planner_names", None)
    return list(names()) if names is not None else list(planners.PLANNERS)


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


def mcu_planners(settings: dict) -> list[str]:
    """The planners the settings ask for: the chosen one, then the compared one if any."""
    chosen, compare = settings["planner"], settings.get("compare", MCU_NO_COMPARE)
    return [chosen] + ([compare] if compare not in (MCU_NO_COMPARE, chosen, None) else [])


def mcu_state(model, path, board, plans, note: str = "", compare_note: str = ""):
    """The McuState of `model` (loaded from `path`) on `board`; `plans`: (Plan, ms) pairs,
    the chosen planner's first (its arena is the one checked against the board)."""
    import os

    from inferlab.engines.mcu.boards import fit_check
    from inferlab.views.mcu_records import McuState

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
    import numpy as np

    from inferlab.engines.mcu.interpreter import ArenaInterpreter
    from inferlab.engines.mcu.virtual_board import random_input
    from inferlab.views.mcu_records import RunRecord

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
    import dataclasses

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


def mcu_section(settings: dict, state) -> dict:
    """The MCU lab's section: settings, the McuState (plans, per-op table, runs), metrics."""
    metrics = {"model": state.model, "board": state.board.id,
               "arena_bytes": {lay.planner: lay.arena_bytes for lay in state.layouts},
               "lower_bound_bytes": state.layouts[0].lower_bound_bytes,
               "sram_margin_bytes": state.fit.sram_margin_bytes,
               "flash_margin_bytes": state.fit.flash_margin_bytes, "fits": state.fit.fits,
               "macs": sum(o.macs for o in state.ops),
               "est_cycles": sum(o.est_cycles for o in state.ops)}
    if state.host_run is not None:
        metrics["host_total_us"] = state.host_run.total_us
    if state.board_run is not None:
        metrics["board_total_us"] = state.board_run.total_us
    return section(settings, state.to_dict(), metrics)


def read_mcu_section(sec: dict):
    """(settings, McuState) from a snapshot's `labs.mcu`; ValueError names a bad field."""
    from inferlab.views.mcu_records import McuState

    settings = _get(sec, "settings", "labs.mcu")
    state = McuState.from_dict(_get(sec, "state", "labs.mcu"))
    return dict(MCU_DEFAULTS) | dict(settings), state


# kv ----------------------------------------------------------------------------------------------
# The KV lab's run: settings, what the run is (KVRunInfo), every sequence (SeqInfo) and the
# per-step records. Each step keeps its pool state while n_blocks × steps stays under
# KV_POOL_CELLS_LIMIT; past that only every k-th step's (and the last) is kept.
KV_DEFAULTS = {"scenario": "shared-prompt", "model": "auto", "block_size": 16, "n_blocks": 0}
KV_POOL_CELLS_LIMIT = 400_000


def kv_metrics(records) -> dict:
    """Headline figures of a run. Waste is each allocator's at its peak reservation (the step
    reserving the most slots; of those, the one holding the most tokens), as `bench kv`."""
    if not records:
        return {"steps": 0}

    def peak(side):
        return max((getattr(r, side) for r in records),
                   key=lambda s: (s.slots_reserved, s.slots_filled))

    paged, contiguous = peak("paged"), peak("contiguous")
    last = records[-1]
    events = [e for r in records for e in r.events]
    return {
        "steps": len(records),
        "model_steps": sum(1 for r in records if r.ran_model),
        "paged_waste_frac": paged.waste_frac,
        "contiguous_waste_frac": contiguous.waste_frac,
        "paged_peak_reserved_slots": paged.slots_reserved,
        "contiguous_peak_reserved_slots": contiguous.slots_reserved,
        "paged_max_concurrent_seqs": max(r.paged.n_seqs for r in records),
        "contiguous_max_concurrent_seqs": max(r.contiguous.n_seqs for r in records),
        "prefix_hit_rate": last.paged.prefix_hit_rate,
        "max_shared_blocks": max(r.paged.shared_blocks for r in records),
        "cow_copies": sum(1 for e in events if "copy-on-write" in e),
        "preemptions": sum(1 for e in events if " preempted (" in e),
        "refused": sum(1 for q in last.seqs if q.status == "refused"),
        "finished": sum(1 for q in last.seqs if q.status == "finished"),
        "evictions": last.paged.evictions,
        "model_s": sum(r.step_s for r in records),
    }


def kv_section(settings: dict, info, seq_infos, records) -> dict:
    """`info`: KVRunInfo (None before any run); `seq_infos`: SeqInfo; `records`: KVStepRecord."""
    from dataclasses import asdict

    from inferlab.engines.kvlab.records import step_to_dict

    if info is None:
        return section(settings, {}, {"steps": 0})
    n = max(len(records), 1)
    every = max(1, -(-info.n_blocks * n // KV_POOL_CELLS_LIMIT))
    steps = [step_to_dict(r, with_pool=(i % every == 0 or i == len(records) - 1))
             for i, r in enumerate(records)]
    state = {"run": asdict(info), "sequences": [asdict(s) for s in seq_infos], "steps": steps,
             "pool_every": every}
    return section(settings, state, kv_metrics(records))


def read_kv_section(sec: dict):
    """(settings, KVRunInfo or None, [SeqInfo], [KVStepRecord]); ValueError names a bad field."""
    from inferlab.engines.kvlab.records import info_from_dict, seq_info_from_dict, step_from_dict

    settings = dict(KV_DEFAULTS) | dict(_get(sec, "settings", "labs.kv"))
    state = _get(sec, "state", "labs.kv")
    if not state:
        return settings, None, [], []
    info = info_from_dict(_get(state, "run", "labs.kv.state"), "labs.kv.state.run")
    seqs = _get(state, "sequences", "labs.kv.state")
    steps = _get(state, "steps", "labs.kv.state")
    if not isinstance(seqs, list) or not isinstance(steps, list):
        raise ValueError("labs.kv.state: sequences and steps must be lists")
    seq_infos = [seq_info_from_dict(s, f"labs.kv.state.sequences[{i}]") for i, s in enumerate(seqs)]
    records = [step_from_dict(s, f"labs.kv.state.steps[{i}]") for i, s in enumerate(steps)]
    for i, rec in enumerate(records):
        if rec.pool is not None and rec.pool.n_blocks != info.n_blocks:
            raise ValueError(f"labs.kv.state.steps[{i}].pool: {rec.pool.n_blocks} blocks, the "
                             f"run has {info.n_blocks}")
    return settings, info, seq_infos, records


def kv_run(settings: dict, device: str = "cpu", max_steps: int | None = None,
           on_step=None):
    """Run a KV lab scenario to its end headless: (KVLabSession, records).

    `on_step(record)` is called after each step (progress, trace spans).
    """
    from inferlab.engines.kvlab.models import load_lab_model
    from inferlab.engines.kvlab.session import KVLabSession

    model, tokenizer = load_lab_model(settings["model"], device)
    session = KVLabSession(model, tokenizer, settings["scenario"],
                           block_size=int(settings["block_size"]),
                           n_blocks=int(settings["n_blocks"]) or None)
    records = []
    while not session.done and (max_steps is None or len(records) < max_steps):
        records.append(session.step())
        if on_step is not None:
            on_step(records[-1])
    return session, records


def kv_trace_step(recorder, record, end_s: float | None = None) -> None:
    """One KV step as a span ("kv step N", ending now) plus counters of both allocators."""
    end = recorder.now_s() if end_s is None else end_s
    recorder.add_span(f"kv step {record.step}", end - record.step_s, end, cat="kv",
                      args={"ran_model": record.ran_model, "events": len(record.events)})
    p, c = record.paged, record.contiguous
    recorder.counter("kv reserved slots", {"paged": p.slots_reserved,
                                           "contiguous": c.slots_reserved}, ts_s=end, cat="kv")
    recorder.counter("kv waste %", {"paged": 100 * p.waste_frac,
                                    "contiguous": 100 * c.waste_frac}, ts_s=end, cat="kv")
