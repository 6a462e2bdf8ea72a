"""The command-line options every lab that replays a published trace takes, with one meaning:
`--trace F --trace-format FMT --window START:END --time-scale X --sample N` (stream.read_trace's
window, time scale and seeded sample; the sample drawn with the lab's own --seed)."""

from __future__ import annotations

from inferlab.engines.serve.traces.detect import FORMATS


def add_trace_arguments(p) -> None:
    p.add_argument("--trace", default=None, metavar="FILE",
                   help="a published trace (Mooncake, Bailian, Azure, BurstGPT, ShareGPT or "
                        "InferLab JSONL; the format read from its first line) instead of the "
                        "seeded workload; block hash ids become shared prompt content")
    p.add_argument("--trace-format", default=None, choices=FORMATS,
                   help="the --trace file's format, when its first line should not decide")
    p.add_argument("--window", default=None, metavar="START:END",
                   help="only the --trace requests from START to END seconds after its first "
                        "arrival")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="--trace inter-arrival times multiplied by this (default 1)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="N of the --trace requests, drawn uniformly with --seed")


def trace_setting(args, trace_format: str, **extra) -> dict:
    """The `trace` settings field (engines.labs.batching.settings.TraceSetting) of the
    --trace options in `args`, with the format the file was read as and a lab's `extra`
    fields: what a run's snapshot records of the trace it replayed."""
    return {"path": str(args.trace), "format": trace_format, "window": args.window,
            "time_scale": float(args.time_scale), "sample": args.sample, **extra}
