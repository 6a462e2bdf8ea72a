"""A run's figures: per execution its step time, the split and its share between ops, the
check against eager; the issue's ratios between executions."""

from __future__ import annotations

from inferlab.engines.labs.step.records import ExecutionRecord, StepRunInfo


def execution_figures(record: ExecutionRecord) -> dict:
    s = record.split
    return {"step_s": record.step_s, "step_unprofiled_s": record.step_unprofiled_s,
            "at_roof_s": s.at_roof_s, "inside_ops_s": s.inside_ops_s,
            "between_ops_s": s.between_ops_s, "between_ops_share": s.between_ops_share,
            "ops": len(record.ops), "ops_beating_roof": s.beats_roof,
            "compile_s": record.compile_s, "max_abs_diff": record.max_abs_diff,
            "matches_eager": record.matches, "kernel_path": record.kernel_path}


def step_metrics(info: StepRunInfo, executions: list[ExecutionRecord]) -> dict:
    """The section's metrics: the run's shape and each execution's figures."""
    by_name = {r.execution: r for r in executions}
    out = {"model": info.model_name, "phase": info.phase, "rows": info.rows,
           "threads": info.threads, "peak_flops": info.roof.peak_flops,
           "bandwidth_bytes_per_s": info.roof.bw_bytes_per_s,
           "executions": {r.execution: execution_figures(r) for r in executions}}
    eager = by_name.get("eager")
    for other in ("compile", "native"):
        if eager is not None and other in by_name and by_name[other].step_unprofiled_s > 0:
            out[f"{other}_vs_eager"] = eager.step_unprofiled_s / by_name[other].step_unprofiled_s
    return out
