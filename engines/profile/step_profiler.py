"""One forward step profiled op by op: torch.profiler (record_shapes, with_flops) around a step
callable, the native decoder's own kernel timings where it runs, the ops costed.

`profile_step(fn, cfg, repeats)` runs `fn` `repeats` times under one profiler, each call in a
span "inferlab::step", and keeps the call of median wall time: its top-level ops
(`step_ops.step_ops`), where the native decoder ran inside it its kernels in place of its span
(`native_ops`), native linears called from Python costed from their own records
(`native_calls`), and the step's own time (the span's). What `fn` returned is kept (the logits
a comparison checks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from inferlab.engines.kernels.decoder import PROFILER_SPAN, recording_timings
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.profile.native_calls import recording_calls
from inferlab.engines.profile.native_ops import native_ops
from inferlab.engines.profile.step_ops import OP_SPAN_PREFIX, StepOp, step_ops

STEP_SPAN = "inferlab::step"


@dataclass(frozen=True)
class ProfiledStep:
    """The median step of a profiled run: its wall time under the profiler, its ops (times
    from the step's start), the lanes they ran on (in first-seen order), how many steps were
    profiled, and what the step returned."""

    step_s: float
    ops: tuple[StepOp, ...]
    lanes: tuple[str, ...]
    repeats: int
    output: object


def _activities(device: torch.device) -> list:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])


def profile_step(fn: Callable[[], object], cfg: ModelConfig, repeats: int = 3,
                 device: str | torch.device = "cpu") -> ProfiledStep:
    """`fn` (one step) profiled `repeats` times; the median step (see the module docstring)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    dev = torch.device(device)
    outputs = []
    with recording_timings() as timings, recording_calls() as calls, \
            profile(activities=_activities(dev), record_shapes=True, with_flops=True) as prof:
        for _ in range(repeats):
            with record_function(STEP_SPAN):
                outputs.append(fn())
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
    events = prof.events()
    steps = sorted((e for e in events if e.name == STEP_SPAN), key=lambda e: e.time_range.start)
    if len(steps) != repeats:
        raise RuntimeError(f"the profiler recorded {len(steps)} steps of {repeats}")
    by_time = sorted(range(repeats), key=lambda i: steps[i].time_range.elapsed_us())
    pick = by_time[(repeats - 1) // 2]
    step = steps[pick]
    ops = _cost_calls(step_ops(step), calls, pick, repeats)
    decoder_spans = sorted((e for e in events if e.name == PROFILER_SPAN
                            and step.time_range.start <= e.time_range.start
                            <= step.time_range.end), key=lambda e: e.time_range.start)
    if decoder_spans:
        per_step = len(timings) // repeats
        mine = timings[pick * per_step:(pick + 1) * per_step]
        for span, timing in zip(decoder_spans, mine, strict=True):
            ops += native_ops(timing, cfg, (span.time_range.start - step.time_range.start) / 1e6)
        ops.sort(key=lambda op: op.start_s)
    lanes = tuple(dict.fromkeys(op.lane for op in ops))
    return ProfiledStep(step_s=step.time_range.elapsed_us() / 1e6, ops=tuple(ops), lanes=lanes,
                        repeats=repeats, output=outputs[pick])


def _cost_calls(ops: list[StepOp], calls: list[tuple[float, float]], pick: int,
                repeats: int) -> list[StepOp]:
    """`ops` with each spanned native call's (flops, bytes) from the picked step's records
    (every step makes the same calls in the same order)."""
    spanned = [i for i, op in enumerate(ops) if op.name.startswith(OP_SPAN_PREFIX)]
    if not spanned:
        return ops
    per_step = len(calls) // repeats
    mine = calls[pick * per_step:(pick + 1) * per_step]
    if len(mine) != len(spanned):
        raise RuntimeError(f"{len(spanned)} native call spans but {len(mine)} records")
    for i, (flops, moved) in zip(spanned, mine, strict=True):
        ops[i] = replace(ops[i], flops=float(flops), bytes=float(moved))
    return ops
