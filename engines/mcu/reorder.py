"""Operator reordering: run a branchy graph's operators in the order that needs least memory.

TFLM runs operators in stored order, and a tensor lives from the operator that writes it to
the last one that reads it. In a graph whose paths branch and join, the stored order may
keep a big tensor waiting while another branch runs; another topological order can finish
the branch that frees most first (Liberis & Lane, "Neural networks on microcontrollers:
saving memory at inference via operator reordering", 2019).

The search is over sets of executed operators (every prefix of a topological order is a
"down-set" of the dependency graph). With S executed, the tensors resident are those
already written (or graph inputs) that a graph output is or an unexecuted operator still
reads; running v next needs resident(S) + v's outputs + v's scratch at that step, exactly
the live bytes TFLM's lifetimes give at v's step. Dynamic programming over down-sets keeps,
for each, the order of it with the smallest peak: exact while the number of down-sets per
layer stays under `beam`, a beam search (best partial peaks kept) beyond it.

`plan_reordered(model)` returns the order's plan (placed by `plan_best`) only when it is
smaller than the stored order's; otherwise the stored order stands. `write_reordered`
rewrites a `.tflite` file with its operators in a new order, so that TFLM itself (which
only runs stored order) can run the schedule.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from inferlab.engines.mcu.graph import Model, ModelError, load_model
from inferlab.engines.mcu.lifetimes import (
    Buffer,
    align_up,
    is_planned,
    order_spans,
    scheduled_buffers,
    scratch_requests,
)
from inferlab.engines.mcu.plan import Plan
from inferlab.engines.mcu.planners import PLANNERS, arena_bytes, lower_bound_bytes

DEFAULT_BEAM = 256  # down-sets kept per layer before the search stops being exact


@dataclass(frozen=True)
class Schedule:
    """An execution order and the peak live bytes (the lower bound) it gives."""

    order: tuple[int, ...]
    peak_bytes: int
    exact: bool  # True when the search was exhaustive: no order has a lower peak


# Operators with effects beyond their output tensors: they keep stored order among
# themselves (as do custom ops and any operator touching a variable tensor).
STATEFUL_OPS = frozenset(
    {"ASSIGN_VARIABLE", "READ_VARIABLE", "VAR_HANDLE", "CALL_ONCE", "CALL", "IF", "WHILE"}
)


def _stateful(model: Model, op) -> bool:
    return (
        op.is_custom
        or op.op in STATEFUL_OPS
        or any(t >= 0 and model.tensors[t].is_variable for t in (*op.inputs, *op.outputs))
    )


def dependencies(model: Model) -> list[set[int]]:
    """Per operator, the operators that must run before it: the writers of the tensors it
    reads, and for a stateful operator (custom, variables, control flow) the previous
    stateful operator in stored order."""
    producer: dict[int, int] = {}
    for op in model.operators:
        for t in op.outputs:
            producer[t] = op.index
    deps = [
        {producer[t] for t in op.inputs if t >= 0 and t in producer and producer[t] != op.index}
        for op in model.operators
    ]
    previous = None
    for op in model.operators:
        if _stateful(model, op):
            if previous is not None:
                deps[op.index].add(previous)
            previous = op.index
    return deps


def is_topological(model: Model, order: Sequence[int]) -> bool:
    """Whether `order` is a permutation of the operators that runs each after its inputs'
    producers."""
    if sorted(order) != list(range(len(model.operators))):
        return False
    position = {op: k for k, op in enumerate(order)}
    deps = dependencies(model)
    return all(position[d] < position[i] for i in order for d in deps[i])


def order_buffers(model: Model, order: Sequence[int]) -> list[Buffer]:
    """TFLM's arena buffers when the operators run in `order`."""
    return scheduled_buffers(model, order_spans(order), len(model.operators))


def order_peak_bytes(model: Model, order: Sequence[int]) -> int:
    """The lower bound (largest live total over steps) of running in `order`."""
    return lower_bound_bytes(order_buffers(model, order))


def best_order(model: Model, beam: int = DEFAULT_BEAM) -> Schedule:
    """The topological order with the smallest peak live bytes; ties keep stored order's
    earlier operators first. Exact unless a layer had more than `beam` down-sets."""
    ops = model.operators
    n = len(ops)
    stored = tuple(range(n))
    if n == 0:
        return Schedule(stored, order_peak_bytes(model, stored), True)
    deps = dependencies(model)
    need = [sum(1 << d for d in deps[i]) for i in range(n)]
    outputs = set(model.outputs)

    size: dict[int, int] = {}
    readers: dict[int, int] = {}  # tensor -> bitmask of operators reading it
    for op in ops:
        for t in set(op.inputs) | set(op.outputs):
            if t >= 0 and is_planned(model, t):
                size[t] = align_up(model.tensors[t].nbytes)
        for t in set(op.inputs):
            if t >= 0 and t in size:
                readers[t] = readers.get(t, 0) | (1 << op.index)
    written = {t for op in ops for t in op.outputs}
    for t in (*model.inputs, *model.outputs):
        if is_planned(model, t):
            size[t] = align_up(model.tensors[t].nbytes)
    scratch = [sum(align_up(b) for b in scratch_requests(model, op) if b > 0) for op in ops]
    out_bytes = [sum(size.get(t, 0) for t in set(op.outputs)) for op in ops]

    # Step 0 (before any operator): graph inputs and unwritten tensors someone reads.
    start_resident = sum(
        s for t, s in size.items() if t not in written and (t in outputs or readers.get(t))
    )
    step0 = sum(s for t, s in size.items() if t not in written)

    def freed(executed: int, v: int) -> int:
        """Bytes that stop being resident once v has run after `executed`."""
        done = executed | (1 << v)
        total = 0
        for t in set(ops[v].inputs) | set(ops[v].outputs):
            if t < 0 or t not in size or t in outputs:
                continue
            if readers.get(t, 0) & ~done == 0:
                total += size[t]
        return total

    # layer: executed mask -> (peak so far, resident bytes, order)
    layer: dict[int, tuple[int, int, tuple[int, ...]]] = {0: (step0, start_resident, ())}
    exact = True
    for _ in range(n):
        nxt: dict[int, tuple[int, int, tuple[int, ...]]] = {}
        for executed, (peak, resident, order) in layer.items():
            for v in range(n):
                if executed >> v & 1 or need[v] & ~executed:
                    continue
                step_bytes = resident + out_bytes[v] + scratch[v]
                new_peak = max(peak, step_bytes)
                new_resident = step_bytes - scratch[v] - freed(executed, v)
                key = executed | (1 << v)
                cand = (new_peak, new_resident, (*order, v))
                have = nxt.get(key)
                if have is None or cand < have:
                    nxt[key] = cand
        if len(nxt) > beam:
            exact = False
            nxt = dict(sorted(nxt.items(), key=lambda kv: kv[1])[:beam])
        layer = nxt
    ((_, (peak, _, order)),) = layer.items()
    return Schedule(tuple(order), peak, exact)


def plan_reordered(model: Model, planner: str = "best", beam: int = DEFAULT_BEAM) -> Plan:
    """The plan of the best order found, placed by `planner`, or of stored order when no
    order gives a smaller arena. `op_order` is always set (to stored order when kept)."""
    n = len(model.operators)
    stored = tuple(range(n))
    found = best_order(model, beam)
    best = _plan_order(model, stored, planner)
    if found.order != stored:
        other = _plan_order(model, found.order, planner)
        if (other.arena_bytes, other.lower_bound_bytes) < (
            best.arena_bytes,
            best.lower_bound_bytes,
        ):
            best = other
    return best


def _plan_order(model: Model, order: tuple[int, ...], planner: str) -> Plan:
    buffers = order_buffers(model, order)
    offsets = PLANNERS[planner](buffers)
    return Plan(
        planner="reordered",
        buffers=tuple(buffers),
        offsets=tuple(offsets),
        arena_bytes=arena_bytes(buffers, offsets),
        lower_bound_bytes=lower_bound_bytes(buffers),
        op_order=order,
        step_labels=("inputs", *(f"{model.operators[i].op}#{i}" for i in order)),
    )


def write_reordered(data: bytes, order: Sequence[int]) -> bytes:
    """The `.tflite` file `data` with subgraph 0's operators stored in `order` (operator
    indices of the original), everything else byte for byte the same. TFLM runs stored
    order, so this is how a reordered schedule reaches it."""
    from tflite.Model import Model as FbModel  # here: start-up, as graph._read_model

    data = bytes(data)
    model = load_model(data)  # the same checks as any model file
    if not is_topological(model, order):
        raise ModelError(
            f"order {list(order)} is not a topological order of {model.name}'s operators"
        )
    fb = FbModel.GetRootAs(data, 0)
    sg = fb.Subgraphs(0)
    tab = sg._tab
    field = tab.Offset(10)  # SubGraph.operators
    n = tab.VectorLen(field) if field else 0
    if sorted(order) != list(range(n)):
        raise ModelError(f"order {list(order)} is not a permutation of the {n} operators")
    start = tab.Vector(field)
    slots = [start + 4 * j for j in range(n)]
    targets = [p + struct.unpack_from("<I", data, p)[0] for p in slots]
    if min(targets, default=0) < start + 4 * n:
        raise ModelError("operators vector points backwards: not a valid flatbuffer")
    out = bytearray(data)
    for j, i in enumerate(order):
        struct.pack_into("<I", out, slots[j], targets[i] - slots[j])
    return bytes(out)
