"""`inferlab screenshot`: render a lab offscreen to a PNG (or SVG)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("screenshot", help="render a lab offscreen to an image file")
    p.add_argument("--lab", required=True, help="lab id: hardware, roofline, memory, ...")
    p.add_argument("--out", required=True, help="output .png (or .svg)")
    p.add_argument("--snapshot", help="show this snapshot read-only instead of live data")
    p.add_argument("--size", default="1280x800", help="window size WxH (default 1280x800)")
    p.set_defaults(func=run)


def run(args) -> int:
    from inferlab.app.offscreen import render_lab

    try:
        w, h = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise ValueError(f"--size {args.size!r}: expected WIDTHxHEIGHT, e.g. 1280x800") from None
    path = render_lab(args.lab, args.out, snapshot=args.snapshot, size=(w, h))
    print(path)
    return 0
