"""The step lab's snapshot section (`labs.step`): `step_section` writes the settings, the run
and every execution's profiled step (its ops: the profile), with the figures as metrics, and
the trace the Trace tab had open (`trace_section.py`);
`read_step_section` reads it back strictly into a `StepSnapshot` (ValueError naming the
field)."""

from __future__ import annotations

from inferlab.engines.fields import read_object
from inferlab.engines.labs.step.metrics import step_metrics
from inferlab.engines.labs.step.records import (
    StepRunInfo,
    StepSnapshot,
    read_executions,
)
from inferlab.engines.labs.step.settings import check_step_settings
from inferlab.engines.labs.step.trace_section import read_trace
from inferlab.engines.profile.trace_profile import TraceProfile
from inferlab.engines.trace.snapshot import lab_section, section_field

WHERE = "labs.step"


def step_section(settings: dict, info: StepRunInfo | None, executions,
                 trace: TraceProfile | None = None) -> dict:
    """`info` None: no run yet (settings only); `trace`: the Trace tab's open trace, stored as
    `TraceProfile.to_dict()` (trace_section.py)."""
    state = {} if info is None else {"run": info.to_dict(),
                                     "executions": [r.to_dict() for r in executions]}
    if trace is not None:
        state["trace"] = trace.to_dict()
    metrics = {} if info is None else step_metrics(info, list(executions))
    return lab_section(settings, state, metrics)


def read_step_section(sec: dict) -> StepSnapshot:
    """The section as a `StepSnapshot`; ValueError names a bad field."""
    read_object(sec, WHERE)
    settings = check_step_settings(section_field(sec, "settings", WHERE), f"{WHERE}.settings")
    state = read_object(section_field(sec, "state", WHERE), f"{WHERE}.state")
    where = f"{WHERE}.state"
    trace = read_trace(state["trace"], f"{where}.trace") if "trace" in state else None
    if "run" not in state and "executions" not in state:
        return StepSnapshot(settings, None, (), trace)
    info = StepRunInfo.from_dict(section_field(state, "run", where), f"{where}.run")
    executions = tuple(read_executions(section_field(state, "executions", where),
                                       where=f"{where}.executions"))
    names = [r.execution for r in executions]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}.executions: {names} names one twice")
    return StepSnapshot(settings, info, executions, trace)
