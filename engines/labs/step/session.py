"""What the step lab computes: the settings' step run by each execution on the same inputs,
profiled op by op, split on this machine's measured roof, its logits checked against eager's.

    step_run(settings)  -> (StepRunInfo, [ExecutionRecord])

Per execution: its model and runner (executions.py), `WARMUP` untimed steps, `repeats` steps
timed without the profiler (median: `step_unprofiled_s`), then `repeats` under it
(`profile.step_profiler`: the median step's ops), the split (`profile.step_split`) on the roof
measured once per device and thread count in this process (`engines.hardware.microbench`, as
the roofline lab measures it). The eager model's logits are the reference every execution's
are compared with (fp32: within TOLERANCE, absolute).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

import torch

from inferlab.engines.hardware.cancel import check_stop
from inferlab.engines.hardware.microbench import measure_roofs
from inferlab.engines.labs.step.executions import (
    check_fits,
    load_execution_model,
    prepare,
    step_inputs,
)
from inferlab.engines.labs.step.records import ExecutionRecord, StepRunInfo
from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.profile.step_profiler import profile_step
from inferlab.engines.profile.step_split import Roof, split_step

WARMUP = 2
RELATIVE_TOLERANCE = 1e-5
"""Logits of an execution against eager's (fp32): max |a − b| ≤ 1e-5 · max |eager logit|.
The paths sum in other orders (blocked matmuls, fused norms, another softmax), so an absolute
1e-5 does not hold on real logits: on SmolLM2 decode (|logit| up to ~28) the native decoder's
sit up to ~6.5e-5 from eager's (2.3e-6 of the largest)."""

_roofs: dict[tuple[str, int], Roof] = {}
_roofs_lock = threading.Lock()


def measured_roof(device: str) -> Roof:
    """This device's fp32 roof at the current thread count, measured once per process
    (`measure_roofs`, quick sizes: the roofline lab's measurement)."""
    key = (device, torch.get_num_threads())
    with _roofs_lock:
        if key not in _roofs:
            roofs = measure_roofs(device, quick=True)
            _roofs[key] = Roof(roofs.device, roofs.peak_flops["fp32"], roofs.bw_bytes_per_s)
        return _roofs[key]


def _median_s(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_execution(execution: str, settings: dict, device: str, inputs, reference,
                  roof: Roof) -> tuple[ExecutionRecord, torch.Tensor]:
    """One execution profiled and checked; (its record, its logits)."""
    model, _tok = load_execution_model(settings["model"], device, execution)
    prepared = prepare(execution, model, inputs, settings["phase"])
    for _ in range(WARMUP):
        prepared.step()
    repeats = int(settings["repeats"])
    unprofiled_s = _median_s(prepared.step, repeats)
    profiled = profile_step(prepared.step, model.config, repeats, device)
    logits = profiled.output.float().cpu()
    ref = logits if reference is None else reference
    diff = float((logits - ref).abs().max())
    scale = float(ref.abs().max())
    record = ExecutionRecord(
        execution=execution, kernel_path=prepared.kernel_path, step_s=profiled.step_s,
        step_unprofiled_s=unprofiled_s, compile_s=prepared.compile_s, repeats=repeats,
        ops=profiled.ops, lanes=profiled.lanes,
        split=split_step(profiled.step_s, profiled.ops, roof), max_abs_diff=diff,
        max_abs_logit=scale, tolerance=RELATIVE_TOLERANCE * scale,
        matches=diff <= RELATIVE_TOLERANCE * scale)
    return record, logits


def step_run(settings: dict, device: str = "cpu",
             progress: Callable[[float | None, str], None] | None = None,
             should_stop: Callable[[], bool] | None = None,
             on_execution: Callable[[ExecutionRecord], None] | None = None):
    """(StepRunInfo, [ExecutionRecord]) of checked settings, executions in the settings' order
    (each handed to `on_execution` as it is done). `should_stop()` True ends the run between
    executions (Cancelled)."""
    say = progress or (lambda fraction, message: None)
    threads = int(settings["threads"])
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        say(None, f"loading {settings['model']}")
        try:
            eager_model, _tok = load_lab_model(settings["model"], device, kernels="torch")
        except (ValueError, OSError) as e:
            raise ValueError(f"settings.model: {e}") from None
        cfg = eager_model.config
        check_fits(settings, cfg.max_position)
        inputs = step_inputs(settings, cfg.vocab_size)
        say(None, f"measuring the roof of {device}")
        roof = measured_roof(device)
        rows = len(inputs[0]) if settings["phase"] == "prefill" else len(inputs)
        info = StepRunInfo(
            model=settings["model"], model_name=cfg.name, phase=settings["phase"],
            batch=int(settings["batch"]), context=int(settings["context"]),
            tokens=int(settings["tokens"]), rows=rows, device=device,
            threads=torch.get_num_threads(),
            cpu_capability=torch.backends.cpu.get_cpu_capability(), roof=roof)
        order = sorted(settings["executions"], key=lambda e: e != "eager")  # eager first
        reference = None
        if "eager" not in order:
            prepared = prepare("eager", eager_model, inputs, settings["phase"])
            reference = prepared.step().float().cpu()
        records = {}
        for i, execution in enumerate(order):
            check_stop(should_stop)
            say(i / len(order), f"profiling {execution}")
            record, logits = run_execution(execution, settings, device, inputs, reference,
                                           roof)
            if execution == "eager":
                reference = logits
            records[execution] = record
            if on_execution is not None:
                on_execution(record)
        say(1.0, "done")
        return info, [records[e] for e in settings["executions"]]
    finally:
        torch.set_num_threads(before)
