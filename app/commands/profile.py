"""`inferlab profile open TRACE`: a torch.profiler Chrome trace (.json or .json.gz, vLLM's and
SGLang's profiler output too) read as a stream: its kernel or op table and, per GPU stream or
CPU thread, the time in compute, memory copies, communication and idle; with `--roofline`, its
ops that carry recorded shapes on a roof (this machine's, measured; or a hardware preset's).

`inferlab profile compare A B`: two traces per op or kernel name, B / A."""

from __future__ import annotations

from inferlab.app.cli import print_json
from inferlab.app.cli_progress import CliProgress
from inferlab.engines.hardware.microbench import measure_roofs
from inferlab.engines.hardware.presets import list_hardware_presets, load_hardware_preset
from inferlab.engines.profile.chrome_trace import read_chrome_trace
from inferlab.engines.profile.compare import compare_traces, shared_level
from inferlab.engines.profile.op_roofline import Roof
from inferlab.engines.profile.trace_profile import profile_trace
from inferlab.engines.roofline.units import format_bytes, format_flops

TOP_ROWS = 30  # the text table's rows; --json has every name
MEASURED = "measured"


def register(sub) -> None:
    p = sub.add_parser("profile", help="open a torch.profiler trace: kernel table, time "
                                       "breakdown, ops on the roofline; compare two")
    actions = p.add_subparsers(dest="profile_action", metavar="ACTION", required=True)
    show = actions.add_parser("open", help="kernel / op table and compute, memory, "
                                           "communication, idle per stream or thread")
    show.add_argument("trace", metavar="TRACE", help="Chrome trace (.json or .json.gz)")
    show.add_argument("--roofline", nargs="?", const=MEASURED, default=None, metavar="ROOF",
                      help="also the ops recorded with shapes (record_shapes=True) on a roof: "
                           f"'{MEASURED}' (this machine's, measured quickly; the default) or a "
                           f"hardware preset ({', '.join(list_hardware_presets())})")
    show.add_argument("--json", action="store_true", help="print JSON")
    both = actions.add_parser("compare", help="two traces per op or kernel name: B / A")
    both.add_argument("trace_a", metavar="A", help="Chrome trace (.json or .json.gz)")
    both.add_argument("trace_b", metavar="B", help="Chrome trace (.json or .json.gz)")
    both.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.profile_action == "compare":
        return run_compare(args)
    roof = None if args.roofline is None else _roof(args.roofline)
    with CliProgress("profile open") as progress:
        p = profile_trace(args.trace, roof, progress=progress)
    if args.json:
        print_json(p.to_dict())
        return 0
    what = "GPU kernels" if p.level == "gpu" else "CPU ops"
    rows = p.kernels
    print(f"{p.path}: {format_bytes(p.bytes_read)}, {p.events:,} complete "
          f"events; {what}: {len(rows)} names")
    if not rows:
        print("  no GPU kernel or CPU op in this trace")
        return 0
    width = min(max(len(r.name) for r in rows[:TOP_ROWS]), 60)
    print(f"  {'name':<{width}}  {'calls':>8}  {'total ms':>10}  {'mean µs':>10}  {'share':>6}")
    for r in rows[:TOP_ROWS]:
        print(f"  {_cut(r.name, width):<{width}}  {r.calls:>8,}  {r.total_s * 1e3:>10.3f}  "
              f"{r.mean_s * 1e6:>10.2f}  {r.share:>6.1%}")
    if len(rows) > TOP_ROWS:
        print(f"  … {len(rows) - TOP_ROWS} more names (--json lists them all)")
    kind = "stream" if p.level == "gpu" else "thread"
    print(f"\ntime per {kind} (ms), first event to last:")
    print(f"  {kind:<24}  {'compute':>10}  {'memory':>10}  {'comm':>10}  {'idle':>10}  {'idle %':>6}")
    for lane in p.lanes:
        idle = lane.idle_s / lane.span_s if lane.span_s > 0 else 0.0
        print(f"  {lane.name[:24]:<24}  {lane.compute_s * 1e3:>10.3f}  {lane.memory_s * 1e3:>10.3f}"
              f"  {lane.communication_s * 1e3:>10.3f}  {lane.idle_s * 1e3:>10.3f}  {idle:>6.1%}")
    if roof is not None:
        _print_roofline(roof, p.ops)
    return 0


def _roof(name: str) -> Roof:
    if name == MEASURED:
        with CliProgress("measuring this machine's roofs") as progress:
            return Roof.from_measured(measure_roofs("cpu", quick=True, progress=progress))
    try:
        return Roof.from_preset(load_hardware_preset(name))
    except (KeyError, ValueError, FileNotFoundError) as e:
        raise ValueError(f"--roofline {name}: not '{MEASURED}' nor a hardware preset "
                         f"({', '.join(list_hardware_presets())})") from e


def _print_roofline(roof: Roof, points) -> None:
    peaks = ", ".join(f"{d} {format_flops(f)}" for d, f in roof.peak_flops.items())
    print(f"\nops on the roof of {roof.name} ({peaks}; {format_bytes(roof.bw_bytes_per_s)}/s):")
    if not points:
        print("  no op with recorded shapes (profile with record_shapes=True)")
        return
    print(f"  {'name':<28}  {'calls':>6}  {'total ms':>9}  {'FLOP/B':>8}  {'achieved':>12}  "
          f"{'of roof':>7}")
    for p in points[:TOP_ROWS]:
        print(f"  {_cut(p.name, 28):<28}  {p.calls:>6,}  {p.time_s * 1e3:>9.3f}  "
              f"{p.intensity:>8.2f}  {format_flops(p.achieved_flops_per_s):>12}  "
              f"{p.of_roof * 100:>6.2g}%")
    if len(points) > TOP_ROWS:
        print(f"  … {len(points) - TOP_ROWS} more (--json lists them all)")


def run_compare(args) -> int:
    with CliProgress("profile compare: A") as progress:
        a = read_chrome_trace(args.trace_a, progress=progress)
    with CliProgress("profile compare: B") as progress:
        b = read_chrome_trace(args.trace_b, progress=progress)
    level = shared_level(a.events, b.events)
    rows = compare_traces(a.events, b.events, level)
    total_a, total_b = sum(r.total_a_s for r in rows), sum(r.total_b_s for r in rows)
    if args.json:
        print_json({"a": a.path, "b": b.path, "level": level, "total_a_s": total_a,
                    "total_b_s": total_b, "ops": {r.name: r.to_dict() for r in rows}})
        return 0
    what = "GPU kernels" if level == "gpu" else "CPU ops"
    print(f"A {a.path}\nB {b.path}\n{what}: {total_a * 1e3:.3f} ms in A, {total_b * 1e3:.3f} ms "
          f"in B (B / A {total_b / total_a if total_a > 0 else float('inf'):.2f})")
    width = min(max((len(r.name) for r in rows[:TOP_ROWS]), default=4), 60)
    print(f"  {'name':<{width}}  {'calls A':>8}  {'calls B':>8}  {'A ms':>9}  {'B ms':>9}  "
          f"{'B / A':>7}")
    for r in rows[:TOP_ROWS]:
        print(f"  {_cut(r.name, width):<{width}}  {r.calls_a:>8,}  {r.calls_b:>8,}  "
              f"{r.total_a_s * 1e3:>9.3f}  {r.total_b_s * 1e3:>9.3f}  {r.b_over_a:>7.2f}")
    if len(rows) > TOP_ROWS:
        print(f"  … {len(rows) - TOP_ROWS} more names (--json lists them all)")
    return 0


def _cut(name: str, width: int) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"
