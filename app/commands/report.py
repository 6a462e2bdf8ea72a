"""`inferlab report SNAPSHOT [--compare B] --out r.html`: one self-contained HTML file (the
labs' pages as embedded PNGs, their figures and settings, the host facts; with --compare the
comparison's tables, both runs' pages and each lab's plots with A and B overlaid) that opens
in any browser without InferLab."""

from __future__ import annotations

from pathlib import Path

from inferlab.app.labs.registry import lab_headlines
from inferlab.app.report import build_report, report_path, write_report
from inferlab.engines.trace.compare import compare_snapshots
from inferlab.engines.trace.snapshot import read_snapshot


def register(sub) -> None:
    p = sub.add_parser("report", help="write a snapshot (or two compared) as one HTML file")
    p.add_argument("snapshot", help="the snapshot (.json)")
    p.add_argument("--compare", metavar="B", help="a second snapshot: compare it against the first")
    p.add_argument("--out", required=True, help="output .html file")
    p.add_argument("--no-images", action="store_true",
                   help="tables only: no offscreen render of the labs' pages or plots")
    p.set_defaults(func=run)


def run(args) -> int:

    out = report_path(args.out)  # a bad name is refused before any rendering
    a = read_snapshot(args.snapshot)
    b = read_snapshot(args.compare) if args.compare else None
    images_a = images_b = overlays = None
    notes: list[str] = []
    a_name, b_name = Path(args.snapshot).name, Path(args.compare).name if args.compare else ""
    comparison = compare_snapshots(a, b, headlines=lab_headlines()) if b is not None else None
    if not args.no_images:
        images_a = _images(args.snapshot, list(a.labs), notes)
        if b is not None:
            from inferlab.app.compare_plots import lab_overlays, overlay_pngs

            images_b = _images(args.compare, list(b.labs), notes)
            overlays = overlay_pngs(lab_overlays(a, b, comparison.labs, a_name, b_name),
                                    a_name, b_name)
    page = build_report(a, a_name, images_a, b, b_name, images_b, comparison, notes, overlays)
    print(write_report(out, page))
    return 0


def _images(path: str, lab_ids: list[str], notes: list[str]) -> dict[str, bytes]:
    """The labs' pages as the window replays `path`; a snapshot the window cannot open gets
    none, and a note saying why (its figures and settings still make the report)."""
    from inferlab.app.offscreen_window import render_snapshot_labs

    try:
        return render_snapshot_labs(path, lab_ids)
    except ValueError as exc:
        notes.append(f"{Path(path).name}: the labs' pages could not be drawn ({exc})")
        return {}
