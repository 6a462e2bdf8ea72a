"""`inferlab compare A.json B.json`: two snapshots' figures side by side (A, B, B − A, B / A;
each lab's headline figures first, from its registry entry, marked better or worse, then the
rest, the figures that moved most first), the settings and host facts that differ;
`--fail-if 'FIGURE < BOUND'` exits 1 when B / A of that figure falls past the bound."""

from __future__ import annotations

import sys

from inferlab.app.cli import print_json
from inferlab.app.labs.registry import lab_headlines
from inferlab.engines.trace.compare import (
    compare_snapshots,
    failed_bounds,
    format_figure,
    parse_bound,
)
from inferlab.engines.trace.snapshot import read_snapshot


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare two snapshots: figures, settings, host facts")
    p.add_argument("a", help="snapshot A (.json)")
    p.add_argument("b", help="snapshot B (.json)")
    p.add_argument("--fail-if", action="append", default=[], metavar="'FIGURE < BOUND'",
                   help="exit 1 when B / A of FIGURE (or LAB:FIGURE) is below (<, <=) or "
                        "above (>, >=) BOUND; may be given more than once")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=run)


def run(args) -> int:

    bounds = [parse_bound(text) for text in args.fail_if]  # a bad bound: before any read
    comparison = compare_snapshots(read_snapshot(args.a), read_snapshot(args.b),
                                   headlines=lab_headlines())
    failures = failed_bounds(comparison, bounds)
    if args.json:
        print_json({**comparison.to_dict(), "failed": failures})
    else:
        print(format_comparison(comparison))
    for message in failures:
        print(f"inferlab compare: failed: {message}", file=sys.stderr)
    return 1 if failures else 0


def format_comparison(comparison) -> str:
    """The comparison as text: the differences that make runs incomparable first."""
    lines = []
    if comparison.host:
        lines.append("host facts that differ:")
        lines += [f"  {d.name}: {d.a!r} -> {d.b!r}" for d in comparison.host]
    if comparison.settings:
        lines.append("settings that differ:")
        lines += [f"  {d.where}: {d.name}: {d.a!r} -> {d.b!r}" for d in comparison.settings]
    for side, labs in (("A", comparison.only_in_a), ("B", comparison.only_in_b)):
        if labs:
            lines.append(f"only in {side}: {', '.join(labs)}")
    if not comparison.labs:
        lines.append("no lab is in both snapshots: no figure to compare")
        return "\n".join(lines)
    heads = [r for r in comparison.rows if r.headline]
    rest = [r for r in comparison.rows if not r.headline]
    width = max(len(f"{r.lab}:{r.figure}") for r in comparison.rows) if comparison.rows else 6
    numbers = f"{'A':>12}  {'B':>12}  {'B - A':>12}  {'B / A':<10}"
    if heads:
        label = max(len(_label(r)) for r in heads)
        lines.append("headline figures, as each lab shows them (better, worse: by the "
                     "figure's direction):")
        lines.append(f"{'figure':<{width}}  {'what':<{label}}  {numbers}".rstrip())
        lines += [f"{r.lab + ':' + r.figure:<{width}}  {_label(r):<{label}}  {_numbers(r)}"
                  for r in heads]
    if rest:
        if heads:
            lines.append("other figures, the furthest moved first:")
        lines.append(f"{'figure':<{width}}  {numbers}".rstrip())
        lines += [f"{r.lab + ':' + r.figure:<{width}}  {_numbers(r)}" for r in rest]
    return "\n".join(lines)


def _label(row) -> str:
    return f"{row.label} ({row.unit})" if row.unit else row.label


def _numbers(row) -> str:

    return (f"{format_figure(row.a):>12}  {format_figure(row.b):>12}  "
            f"{format_figure(row.b_minus_a):>12}  {row.ratio_text()}").rstrip()
