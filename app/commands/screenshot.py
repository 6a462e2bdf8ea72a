"""`inferlab screenshot`: render a lab offscreen to a PNG (or SVG); `--lab all` renders every
lab of the registry into a folder (`make screenshots`)."""

from __future__ import annotations

from pathlib import Path

from inferlab.app.labs import registry
from inferlab.app.labs.registry import lab_spec


def register(sub) -> None:
    p = sub.add_parser("screenshot", help="render a lab offscreen to an image file")
    p.add_argument("--lab", required=True, metavar="LAB",
                   help=f"lab id: {', '.join(s.id for s in registry.LABS)}, or all (then --out "
                        "is a folder)")
    p.add_argument("--out", required=True, help="output .png (or .svg); a folder for --lab all")
    p.add_argument("--snapshot", help="show this snapshot read-only instead of live data")
    p.add_argument("--size", help="window size WxH (default: the lab's, 1280x800)")
    p.add_argument("--tab", help="show the lab's tab of this name (e.g. --lab speculative --tab "
                                 "Training); not with --lab all")
    p.set_defaults(func=run)


def _size(text: str | None, lab_id: str) -> tuple[int, int]:
    if text is None:
        return lab_spec(lab_id).screenshot_size
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--size {text!r}: expected WIDTHxHEIGHT, e.g. 1280x800") from None
    return w, h


def run(args) -> int:
    from inferlab.app.offscreen_window import render_lab

    if args.lab == "all":
        if args.tab is not None:
            raise ValueError("--tab names one lab's tab: give --lab LAB, not all")
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        jobs = [(spec.id, folder / f"{spec.id}.png") for spec in registry.LABS]
    else:
        lab_spec(args.lab)  # unknown lab: ValueError listing the labs
        jobs = [(args.lab, Path(args.out))]
    for lab_id, out in jobs:
        print(render_lab(lab_id, out, snapshot=args.snapshot, size=_size(args.size, lab_id),
                         tab=args.tab))
    return 0
