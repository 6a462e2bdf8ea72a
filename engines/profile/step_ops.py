"""One step's ops from a torch.profiler run: the top-level ops inside the step's span, each
with its time and, from its recorded shapes and dtypes, its FLOPs and bytes.

A *top-level* op is a CPU op whose parent is the step's span itself (or a span that only
marks a region, looked through: a user span such as the native decoder's call, and the
torch.compile runtime's own spans, `COMPILE_MARKERS`), so nested ops (aten::linear holding
aten::matmul holding aten::mm) are counted once, by the outermost. A compiled region is thus
seen kernel by kernel: the inductor-generated C++ kernels (recorded only when compiled with
`torch._inductor.config.cpp.enable_kernel_profile`; named `graph_<g>_cpp_fused_<ops>_<n>`,
`is_fused_kernel`) and the aten ops the compiled graph calls (extern kernels: aten::mm,
aten::addmm, SDPA), while its guards and wrappers count as time between ops.
Its cost is `roofline.aten_costs.aten_op_cost` of the op itself where those rules cost it
(matmuls, attention, elementwise, copies), else the sum over its children, costed the same
way down the tree (aten::rms_norm: its pow, add, rsqrt and muls); an op none of whose tree is
costed (views, indexing, reductions) has None: no cost is guessed. A fused inductor kernel has
no FLOP rule (what it fuses is known only from its name): it is timed, not costed. A user span named
"native::<name>" (`native_calls`: a native linear called from Python) is an op too; its cost
comes from its caller's record (`step_profiler`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from inferlab.engines.roofline.aten_costs import aten_op_cost

MAX_SHAPES_CHARS = 120
OP_SPAN_PREFIX = "native::"
COMPILE_MARKERS = ("Torch-Compiled Region", "TorchDynamo Cache Lookup", "Pregraph bytecode",
                   "AOTDispatcher Runtime Wrapper Prologue", "## Call CompiledFxGraph")
"""Name prefixes of the spans torch.compile's runtime records around a compiled region (torch
2.13: dynamo's region and guard lookup, AOTAutograd's prologue, inductor's graph call)."""
FUSED_KERNEL = re.compile(r"^(graph_\d+_)?cpp_")


@dataclass(frozen=True)
class StepOp:
    """One op of a step: `start_s` after the step's start, `dur_s` long, on `lane` (a thread,
    or the native decoder's kernels), `flops` and `bytes` from its shapes (None: not costed),
    torch.profiler's own FLOP count where it gives one (`profiler_flops`), its input shapes
    as text and, for a native kernel, its layer."""

    name: str
    lane: str
    start_s: float
    dur_s: float
    flops: float | None
    bytes: float | None
    profiler_flops: float | None = None
    shapes: str = ""
    layer: int | None = None

    @property
    def end_s(self) -> float:
        return self.start_s + self.dur_s

    @property
    def costed(self) -> bool:
        return self.flops is not None and self.bytes is not None


def event_cost(event) -> tuple[float, float] | None:
    """(flops, bytes) of a profiler FunctionEvent: its own aten cost, else its children's sum
    (see the module docstring), or None."""
    cost = aten_op_cost(event.name, event.input_shapes or [], event.input_dtypes or [])
    if cost is not None:
        return cost.flops, cost.bytes_moved
    parts = [c for c in (event_cost(child) for child in event.cpu_children) if c is not None]
    if not parts:
        return None
    return sum(f for f, _ in parts), sum(b for _, b in parts)


def _shapes_text(event) -> str:
    text = ", ".join(str(s) for s in (event.input_shapes or []) if s)
    return text if len(text) <= MAX_SHAPES_CHARS else text[:MAX_SHAPES_CHARS - 1] + "…"


def lane_name(thread: int, threads: Sequence[int]) -> str:
    """"thread N": the Nth thread seen in the step (0 the main one), stable across runs."""
    return f"thread {list(threads).index(thread)}"


def is_fused_kernel(name: str) -> bool:
    """Whether `name` is an inductor-generated CPU kernel (see the module docstring)."""
    return FUSED_KERNEL.match(name) is not None


def is_marker(event) -> bool:
    """Whether a profiler event only marks a region (looked through, see the docstring)."""
    if event.is_user_annotation:
        return not event.name.startswith(OP_SPAN_PREFIX)
    return event.name.startswith(COMPILE_MARKERS)


def top_level_events(step) -> list:
    """The CPU ops directly under `step` (a FunctionEvent), looking through spans that are
    only markers (`is_marker`): their children count as the step's."""
    out = []
    stack = list(step.cpu_children)
    while stack:
        e = stack.pop()
        if is_marker(e):
            stack.extend(e.cpu_children)
        else:
            out.append(e)
    out.sort(key=lambda e: e.time_range.start)
    return out


def step_ops(step, threads: Sequence[int] | None = None) -> list[StepOp]:
    """The StepOps of the profiler span `step` (times relative to its start)."""
    top = top_level_events(step)
    threads = list(threads) if threads is not None else sorted({step.thread,
                                                               *(e.thread for e in top)})
    t0 = step.time_range.start
    out = []
    for e in top:
        cost = event_cost(e)
        out.append(StepOp(
            name=e.name, lane=lane_name(e.thread, threads),
            start_s=(e.time_range.start - t0) / 1e6,
            dur_s=(e.time_range.end - e.time_range.start) / 1e6,
            flops=None if cost is None else float(cost[0]),
            bytes=None if cost is None else float(cost[1]),
            profiler_flops=float(e.flops) if e.flops else _children_profiler_flops(e),
            shapes=_shapes_text(e)))
    return out


def _children_profiler_flops(event) -> float | None:
    """torch.profiler's FLOPs of an op's tree (it counts the innermost aten::mm etc.)."""
    total = 0.0
    stack = list(event.cpu_children)
    while stack:
        e = stack.pop()
        if e.flops:
            total += float(e.flops)
        else:
            stack.extend(e.cpu_children)
    return total or None
