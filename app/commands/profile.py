"""`inferlab profile open TRACE`: a torch.profiler Chrome trace (.json or .json.gz, vLLM's and
SGLang's profiler output too) read as a stream: its kernel or op table and, per GPU stream or
CPU thread, the time in compute, memory copies, communication and idle."""

from __future__ import annotations

from inferlab.app.cli import print_json
from inferlab.app.cli_progress import CliProgress
from inferlab.engines.profile.breakdown import breakdown
from inferlab.engines.profile.chrome_trace import read_chrome_trace
from inferlab.engines.profile.kernel_table import kernel_table, level_of
from inferlab.engines.roofline.units import format_bytes

TOP_ROWS = 30  # the text table's rows; --json has every name


def register(sub) -> None:
    p = sub.add_parser("profile", help="open a torch.profiler trace: kernel table, time breakdown")
    actions = p.add_subparsers(dest="profile_action", metavar="ACTION", required=True)
    show = actions.add_parser("open", help="kernel / op table and compute, memory, "
                                           "communication, idle per stream or thread")
    show.add_argument("trace", metavar="TRACE", help="Chrome trace (.json or .json.gz)")
    show.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    with CliProgress("profile open") as progress:
        trace = read_chrome_trace(args.trace, progress=progress)
    level = level_of(trace.events)
    rows = kernel_table(trace.events, level)
    lanes = breakdown(trace.events, trace.thread_names, level)
    if args.json:
        print_json({"path": trace.path, "bytes": trace.bytes_read,
                    "events": len(trace.events), "level": level,
                    "kernels": {r.name: r.to_dict() for r in rows},
                    "breakdown": {lane.key: lane.to_dict() for lane in lanes}})
        return 0
    what = "GPU kernels" if level == "gpu" else "CPU ops"
    print(f"{trace.path}: {format_bytes(trace.bytes_read)}, {len(trace.events):,} complete "
          f"events; {what}: {len(rows)} names")
    if not rows:
        print("  no GPU kernel or CPU op in this trace")
        return 0
    width = min(max(len(r.name) for r in rows[:TOP_ROWS]), 60)
    print(f"  {'name':<{width}}  {'calls':>8}  {'total ms':>10}  {'mean µs':>10}  {'share':>6}")
    for r in rows[:TOP_ROWS]:
        name = r.name if len(r.name) <= width else r.name[:width - 1] + "…"
        print(f"  {name:<{width}}  {r.calls:>8,}  {r.total_s * 1e3:>10.3f}  "
              f"{r.mean_s * 1e6:>10.2f}  {r.share:>6.1%}")
    if len(rows) > TOP_ROWS:
        print(f"  … {len(rows) - TOP_ROWS} more names (--json lists them all)")
    kind = "stream" if level == "gpu" else "thread"
    print(f"\ntime per {kind} (ms), first event to last:")
    print(f"  {kind:<24}  {'compute':>10}  {'memory':>10}  {'comm':>10}  {'idle':>10}  {'idle %':>6}")
    for lane in lanes:
        idle = lane.idle_s / lane.span_s if lane.span_s > 0 else 0.0
        print(f"  {lane.name[:24]:<24}  {lane.compute_s * 1e3:>10.3f}  {lane.memory_s * 1e3:>10.3f}"
              f"  {lane.communication_s * 1e3:>10.3f}  {lane.idle_s * 1e3:>10.3f}  {idle:>6.1%}")
    return 0
