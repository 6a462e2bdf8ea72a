"""The step lab's engine: where one forward step's time goes, op by op, on the measured
roofline. A model (any the runtime loads), a phase (prefill of N tokens, or decode at batch B
over a context of C tokens) and executions run side by side on the same inputs — torch eager,
torch.compile (inductor, default mode), the native one-call decoder — each under torch.profiler
(the native decoder also times its own kernels): every op's time, FLOPs and bytes, the ops on
the roofline, the step's timeline and its time split into at the roof / inside ops / between
ops; the outputs checked equal to eager's. Headless: no Qt here.

    settings.py     the settings table and defaults
    executions.py   each execution's step: the model it runs and how (eager, compile, native)
    records.py      the frozen records, StepSnapshot, and their JSON form
    session.py      step_run: inputs, each execution profiled, the split, outputs compared
    section.py      the snapshot section `labs.step`: writer and strict reader
    trace.py        each op as a Perfetto span
    run.py          `inferlab run step`
    bench.py        `inferlab bench step`
"""
