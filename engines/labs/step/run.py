"""`inferlab run step`: one forward step of a model profiled op by op under each execution,
headless: per op its name, time, FLOPs and bytes; per execution the split at_roof_s +
inside_ops_s + between_ops_s = step_s on this machine's measured roof, and its logits against
eager's; the section the window exports (the profile, and each op a Perfetto span).

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from inferlab.engines.fields import option_error
from inferlab.engines.labs.step.metrics import execution_figures
from inferlab.engines.labs.step.section import step_section
from inferlab.engines.labs.step.session import step_run
from inferlab.engines.labs.step.settings import (
    EXECUTIONS,
    PHASES,
    STEP_DEFAULTS,
    check_step_settings,
)
from inferlab.engines.labs.step.trace import step_trace

OPTIONS = {"model": "--model", "phase": "--phase", "batch": "--batch", "context": "--context",
           "tokens": "--tokens", "executions": "--execution", "repeats": "--repeats",
           "threads": "--threads"}


def add_arguments(p) -> None:
    d = STEP_DEFAULTS
    p.add_argument("--model", default=d["model"],
                   help=f"a registry model, .gguf file or Hugging Face folder (default "
                        f"{d['model']})")
    p.add_argument("--phase", default=d["phase"], help=f"{' or '.join(PHASES)} (default "
                                                       f"{d['phase']})")
    p.add_argument("--batch", type=int, default=d["batch"],
                   help=f"decode: sequences, one token each (default {d['batch']})")
    p.add_argument("--context", type=int, default=d["context"],
                   help=f"decode: tokens already cached per sequence (default {d['context']})")
    p.add_argument("--tokens", type=int, default=d["tokens"],
                   help=f"prefill: the prompt's tokens (default {d['tokens']})")
    p.add_argument("--execution", default=",".join(d["executions"]),
                   help=f"executions compared, comma-separated: {', '.join(EXECUTIONS)} "
                        f"(default {','.join(d['executions'])})")
    p.add_argument("--repeats", type=int, default=d["repeats"],
                   help=f"steps timed and profiled; the median is kept (default "
                        f"{d['repeats']})")
    p.add_argument("--threads", type=int, default=d["threads"],
                   help="torch's intra-op threads (default 0: as the process has)")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")


def _executions(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def run(args, recorder):
    """The step under each execution; the summary lists every op of each."""
    try:
        settings = check_step_settings(dict(
            STEP_DEFAULTS, model=args.model, phase=args.phase, batch=args.batch,
            context=args.context, tokens=args.tokens, executions=_executions(args.execution),
            repeats=args.repeats, threads=args.threads))
    except ValueError as e:
        raise option_error(e, OPTIONS) from None
    progress = getattr(args, "progress", None)
    with recorder.span("profile step", cat="step", args={"model": args.model}):
        try:
            info, executions = step_run(settings, args.device, progress=progress)
        except ValueError as e:
            raise option_error(e, OPTIONS) from None
    step_trace(recorder, executions, recorder.now_s())
    section = step_section(settings, info, executions)
    summary = {"model": info.model_name, "phase": info.phase, "rows": info.rows,
               "threads": info.threads, "cpu_capability": info.cpu_capability,
               "peak_flops": info.roof.peak_flops,
               "bandwidth_bytes_per_s": info.roof.bw_bytes_per_s,
               "executions": [{"execution": r.execution, **execution_figures(r),
                               "ops": [{"name": op.name, "time_s": op.dur_s,
                                        "flops": op.flops, "bytes": op.bytes,
                                        "lane": op.lane, "layer": op.layer}
                                       for op in r.ops]}
                              for r in executions]}
    return section, summary
