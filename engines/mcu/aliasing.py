"""In-place aliasing: an operator's output takes its input's bytes where the kernel allows it.

TFLM gives every tensor its own buffer; the greedy planner can reuse bytes only once a
tensor is dead, so an operator's input and output always sit side by side. Some operators
need no second buffer:

- RESHAPE (a "view"): the output is the input's bytes under a new shape. Aliasing it is
  always safe: nothing writes either tensor afterwards, so the two just share one buffer
  for the union of their lifetimes, and the kernel copies nothing.
- Element-wise operators whose output has the input's byte size ("in-place"): ADD with no
  broadcast of that input, SOFTMAX int8 -> int8, QUANTIZE int8/int16 -> the same width.
  Each output element is computed from input elements read before it is written (TFLM's
  reference loops and our kernels alike), so the output may overwrite the input, provided
  nothing reads the input (or anything sharing its bytes) later and it is not a graph output.

Aliased tensors form groups; each group is planned as ONE buffer (the largest member's size,
the union of the members' lifetimes) by `plan_best`, then every member is reported at the
group's offset, so the plan still lists every tensor and the interpreter binds each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inferlab.engines.mcu.graph import ELEMENT_BYTES, Model
from inferlab.engines.mcu.lifetimes import Buffer, is_planned, model_buffers, tensor_lifetimes
from inferlab.engines.mcu.plan import Plan
from inferlab.engines.mcu.planners import PLANNERS, arena_bytes, lower_bound_bytes

VIEW_OPS = frozenset({"RESHAPE"})
IN_PLACE_OPS = frozenset({"ADD", "SOFTMAX", "QUANTIZE"})


@dataclass(frozen=True)
class Alias:
    """Tensor `tensor` (operator `op`'s output) lives in the bytes of tensor `onto`."""

    tensor: int
    onto: int
    op: int
    kind: str  # "view" (RESHAPE) or "in-place" (element-wise)


def _in_place_candidates(model: Model, op_index: int) -> list[int]:
    """The inputs the output of an element-wise op may overwrite (same shape and width)."""
    op = model.operators[op_index]
    if op.op not in IN_PLACE_OPS or len(op.outputs) != 1:
        return []
    out = model.tensors[op.outputs[0]]
    if op.op == "SOFTMAX" and out.dtype != "int8":
        return []
    found = []
    for i in op.inputs[:2] if op.op == "ADD" else op.inputs[:1]:
        if i < 0 or i in found:
            continue
        x = model.tensors[i]
        if x.shape != out.shape or ELEMENT_BYTES.get(x.dtype) != ELEMENT_BYTES.get(out.dtype):
            continue
        if op.op == "QUANTIZE" and x.dtype not in ("int8", "int16"):
            continue  # float -> int changes the width
        found.append(i)
    return found


def find_aliases(model: Model) -> list[Alias]:
    """The aliases that are safe in stored order, operator by operator."""
    lifetimes = tensor_lifetimes(model)
    outputs = set(model.outputs)
    rep: dict[int, int] = {}  # tensor -> its group's first tensor
    members: dict[int, set[int]] = {}
    found = []
    for op in model.operators:
        if len(op.outputs) != 1 or not is_planned(model, op.outputs[0]):
            continue
        y = op.outputs[0]
        if op.op in VIEW_OPS:
            x = op.inputs[0] if op.inputs else -1
            ok = x >= 0 and model.tensors[x].nbytes == model.tensors[y].nbytes
            choice = (x, "view") if ok and is_planned(model, x) else None
        else:
            choice = None
            for x in _in_place_candidates(model, op.index):
                if not is_planned(model, x):
                    continue
                # Overwriting x destroys every tensor sharing its bytes: none may be read
                # after this operator, none may be a graph output.
                same = members.get(rep.get(x, x), {x})
                if all(lifetimes[t][1] <= op.index + 1 and t not in outputs for t in same):
                    choice = (x, "in-place")
                    break
        if choice is None:
            continue
        x, kind = choice
        r = rep.get(x, x)
        rep[x], rep[y] = r, r
        members[r] = members.get(r, {x}) | {y}
        found.append(Alias(tensor=y, onto=x, op=op.index, kind=kind))
    return found


def alias_groups(model: Model, aliases: Sequence[Alias]) -> dict[int, int]:
    """tensor -> the group's representative (its first tensor) for every aliased tensor."""
    rep: dict[int, int] = {}
    for a in aliases:
        r = rep.get(a.onto, a.onto)
        rep.setdefault(a.onto, r)
        rep[a.tensor] = r
    return rep


def merged_buffers(
    buffers: Sequence[Buffer], rep: dict[int, int]
) -> tuple[list[Buffer], list[int]]:
    """One buffer per alias group (largest size, union of lifetimes), others unchanged;
    with, per input buffer, the index of the merged buffer it lives in."""
    merged: list[Buffer] = []
    where: list[int] = []
    slot: dict[int, int] = {}
    for b in buffers:
        key = rep.get(b.tensor, b.tensor) if b.tensor is not None else None
        if key is None or key not in slot:
            if key is not None:
                slot[key] = len(merged)
            where.append(len(merged))
            merged.append(b)
            continue
        k = slot[key]
        m = merged[k]
        merged[k] = Buffer(
            size=max(m.size, b.size),
            first=min(m.first, b.first),
            last=max(m.last, b.last),
            tensor=m.tensor,
            name=f"{m.name} = {b.name}",
        )
        where.append(k)
    return merged, where


def plan_aliased(model: Model, planner: str = "best") -> Plan:
    """TFLM's buffers with every safe alias applied, placed by `planner`."""
    aliases = find_aliases(model)
    buffers = model_buffers(model)
    merged, where = merged_buffers(buffers, alias_groups(model, aliases))
    merged_offsets = PLANNERS[planner](merged)
    offsets = tuple(merged_offsets[k] for k in where)
    return Plan(
        planner="aliased",
        buffers=tuple(buffers),
        offsets=offsets,
        arena_bytes=arena_bytes(merged, merged_offsets),
        lower_bound_bytes=lower_bound_bytes(merged),
        aliases=tuple((a.tensor, a.onto) for a in aliases),
    )
