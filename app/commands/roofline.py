"""`inferlab roofline`: measure this device's roofs (peak FLOP/s per dtype, bandwidth)."""

from __future__ import annotations

import sys

from inferlab.app.cli import print_json
from inferlab.engines.hardware.discovery import torch_device
from inferlab.engines.hardware.microbench import measure_roofs


def register(sub) -> None:
    p = sub.add_parser("roofline", help="measure the roofs of a compute device")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default: cpu)")
    p.add_argument("--quick", action="store_true", help="small sizes: fast, less exact")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:

    torch_device(args.device)  # unknown device: one clear error before any work

    def progress(fraction, message):
        if not args.json and sys.stderr.isatty():
            print(f"\r{fraction:4.0%} {message:60}", end="", file=sys.stderr, flush=True)

    roofs = measure_roofs(args.device, quick=args.quick, progress=progress)
    data = roofs.to_dict()
    if args.json:
        print_json(data)
        return 0
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"device {data['device']}")
    for dtype, flops in data["peak_flops"].items():
        knee = data["knee_flops_per_byte"][dtype]
        print(f"  peak {dtype:5} {flops / 1e9:10.1f} GFLOP/s   knee {knee:6.2f} FLOP/byte")
    print(f"  bandwidth  {data['bandwidth_bytes_per_s'] / 1e9:8.1f} GB/s (copy, read + write)")
    return 0
