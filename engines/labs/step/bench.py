"""`inferlab bench step --json`: SmolLM2-135M decode (batch 1 over 128 cached tokens, one
thread), eager, native and compile profiled on the same inputs.

    decode_between_ops_share_eager    between_ops_s / step_s of the eager step
    decode_between_ops_share_native   the same of the native decoder's step (goal: at most
                                      half of eager's)
    decode_between_ops_share_compile  the same of the compiled step, seen kernel by kernel
                                      (its inductor kernels and the aten ops its graph calls
                                      are the ops; guards and wrappers are between them)
    compile_fused_kernels             inductor-generated kernels in the compiled step, and
    compile_fused_time_share          their share of its ops' time: timed, not costed (a
                                      fused kernel has no FLOP rule), so at_roof_s counts
                                      only the extern ops (matmuls, attention)
    compile_vs_eager_decode           eager's unprofiled step time / compile's (reported), with
                                      compile_s, the first compiled call's time
    trace_read_mb_per_s               `profile open`'s streamed read of a generated 200 MB
                                      torch.profiler-shaped trace (engines/profile/bench.py;
                                      goal ≥ 50)
"""

from __future__ import annotations

from inferlab.engines.labs.step.metrics import execution_figures
from inferlab.engines.labs.step.session import step_run
from inferlab.engines.labs.step.settings import check_step_settings
from inferlab.engines.model.registry import SMOLLM2_ID
from inferlab.engines.profile.bench import TARGET_BYTES, trace_read_mb_per_s
from inferlab.engines.profile.step_ops import is_fused_kernel

GOALS = {"decode_between_ops_share_native": "<= 0.5 × decode_between_ops_share_eager",
         "compile_vs_eager_decode": "reported", "trace_read_mb_per_s": ">= 50"}
BENCH_SETTINGS = {"model": SMOLLM2_ID, "phase": "decode", "batch": 1, "context": 128,
                  "executions": ["eager", "native", "compile"], "repeats": 7, "threads": 1}


def run_step_bench(settings: dict | None = None, trace_bytes: int = TARGET_BYTES) -> dict:
    """The figures above as one flat dict (`settings` overrides BENCH_SETTINGS and
    `trace_bytes` the trace's size: tests run the tiny model on a small trace)."""
    checked = check_step_settings(dict(BENCH_SETTINGS, **(settings or {})))
    info, executions = step_run(checked)
    by = {r.execution: execution_figures(r) for r in executions}
    records = {r.execution: r for r in executions}
    out = {"model": info.model_name, "threads": info.threads,
           "cpu_capability": info.cpu_capability, "peak_flops": info.roof.peak_flops,
           "bandwidth_bytes_per_s": info.roof.bw_bytes_per_s}
    for name, fig in by.items():
        out[f"decode_between_ops_share_{name}"] = fig["between_ops_share"]
        out[f"decode_step_s_{name}"] = fig["step_unprofiled_s"]
        out[f"decode_profiled_step_s_{name}"] = fig["step_s"]
        out[f"decode_max_abs_diff_{name}"] = fig["max_abs_diff"]
        out[f"decode_matches_eager_{name}"] = fig["matches_eager"]
    if "eager" in by and "native" in by:
        eager, native = by["eager"]["between_ops_share"], by["native"]["between_ops_share"]
        out["native_over_eager_between_ops_share"] = native / eager if eager > 0 else None
    if "eager" in by and "compile" in by:
        out["compile_vs_eager_decode"] = (by["eager"]["step_unprofiled_s"]
                                          / by["compile"]["step_unprofiled_s"])
        out["compile_s"] = by["compile"]["compile_s"]
    if "compile" in records:
        fused = [op for op in records["compile"].ops if is_fused_kernel(op.name)]
        ops_s = records["compile"].split.ops_s
        out["compile_fused_kernels"] = len(fused)
        out["compile_fused_time_share"] = (sum(op.dur_s for op in fused) / ops_s
                                           if ops_s > 0 else 0.0)
    out["trace_read_mb_per_s"] = trace_read_mb_per_s(trace_bytes)
    out["goals"] = GOALS
    return out
