"""Two snapshots compared: every figure both hold, the settings and host facts that differ.

A lab's figures are the numbers in its section's `metrics`, nested objects flattened into
dotted names (`latency.ttft_p99_s`); lists are series (plots), not figures. For a lab both
snapshots hold, each figure is a row

    figure, a, b, b_minus_a = b - a, b_over_a = b / a   (None where a is 0 or one side lacks it)

rows ordered by how far they moved (|log(b / a)|, largest first; rows without a ratio after
them). A lab may describe its headline figures (`Headline`: what the lab shows, with a label,
a unit and which way is better); those rows come first, in the order the lab describes them,
each marked better or worse by its direction, then the rest by movement. Settings are
flattened the same way and listed where they differ, as are the host facts and the app
version: two runs on different CPUs or builds are not the same experiment, and the
comparison says so before any figure is read.

`--fail-if 'FIGURE < BOUND'` (`parse_bound`, `failed_bounds`) holds B / A of a figure to a
bound, so a user can gate a change in their own CI.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from inferlab.engines.trace.snapshot import Snapshot

BETTER = ("higher", "lower")


@dataclass(frozen=True)
class Headline:
    """One figure a lab shows, described once (its registry entry): `figure` is the dotted
    name in the lab's metrics, where `*` stands for one name part (`perplexity.*`: a row per
    scheme, the parts it stood for named after the label: "perplexity (int8)"); `better` is
    the direction of an improvement, "higher" or "lower", None where neither is."""

    figure: str
    label: str
    unit: str = ""
    better: str | None = None

    def __post_init__(self) -> None:
        if self.better is not None and self.better not in BETTER:
            raise ValueError(f"headline {self.figure!r}: better {self.better!r}, expected "
                             f"one of {', '.join(BETTER)} or None")

    def matches(self, names: Sequence[str]) -> list[tuple[str, str]]:
        """(name, label) of each of `names` this figure describes, in their order."""
        if "*" not in self.figure:
            return [(self.figure, self.label)] if self.figure in names else []
        pattern = re.compile(r"\.".join("([^.]+)" if part == "*" else re.escape(part)
                                         for part in self.figure.split(".")))
        out = []
        for name in names:
            match = pattern.fullmatch(name)
            if match:
                out.append((name, f"{self.label} ({', '.join(match.groups())})"))
        return out


@dataclass(frozen=True)
class FigureRow:
    lab: str
    figure: str
    a: float | None
    b: float | None
    label: str | None = None  # a headline's (None: a figure the lab does not describe)
    unit: str | None = None
    better: str | None = None  # "higher", "lower" or None
    headline: bool = False

    @property
    def b_minus_a(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def b_over_a(self) -> float | None:
        if self.a is None or self.b is None or self.a == 0:
            return None
        return self.b / self.a

    @property
    def verdict(self) -> str:
        """"better" or "worse" by the figure's direction (B − A against `better`); "" where
        it has none, or nothing moved."""
        change = self.b_minus_a
        if self.better is None or not change:
            return ""
        return "better" if (change > 0) == (self.better == "higher") else "worse"

    def ratio_text(self) -> str:
        """B / A as the tables show it: the ratio, the arrow of B − A, and better or worse."""
        return format_ratio(self.b_over_a, self.b_minus_a, self.verdict)

    def to_dict(self) -> dict:
        return {"lab": self.lab, "figure": self.figure, "a": self.a, "b": self.b,
                "b_minus_a": self.b_minus_a, "b_over_a": self.b_over_a,
                "label": self.label, "unit": self.unit, "better": self.better,
                "headline": self.headline}


@dataclass(frozen=True)
class Difference:
    """A setting or host fact whose value differs (None: absent on that side)."""

    where: str  # "host", "app_version" or a lab id
    name: str
    a: object
    b: object

    def to_dict(self) -> dict:
        return {"where": self.where, "name": self.name, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class Comparison:
    rows: tuple[FigureRow, ...]
    settings: tuple[Difference, ...]
    host: tuple[Difference, ...]
    labs: tuple[str, ...]
    """Labs both snapshots hold (their figures are the rows)."""
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"labs": list(self.labs), "only_in_a": list(self.only_in_a),
                "only_in_b": list(self.only_in_b),
                "figures": [r.to_dict() for r in self.rows],
                "settings_differ": [d.to_dict() for d in self.settings],
                "host_differs": [d.to_dict() for d in self.host]}


def format_figure(value: float | None) -> str:
    """A figure as the comparison shows it: a whole number whole, its thousands grouped
    (17,134,264,320 bytes), any other to 6 significant digits; "–" where absent."""
    if value is None:
        return "–"
    if math.isfinite(value) and abs(value) < 1e15 and value == int(value):
        return f"{int(value):,}"
    return f"{value:.6g}"


def format_ratio(value: float | None, change: float | None = None, verdict: str = "") -> str:
    """B / A with its direction: ▲ up, ▼ down (of B − A where given, else of the ratio), and
    the verdict after it ("better", "worse") where the figure has a direction."""
    moved = (value - 1 if value is not None else 0.0) if change is None else change
    arrow = "" if not moved else " ▲" if moved > 0 else " ▼"
    text = ("–" if value is None else f"{value:.4f}") + arrow
    return f"{text} {verdict}" if verdict and arrow else text


def flatten_numbers(data: object, prefix: str = "") -> dict[str, float]:
    """The numeric leaves of nested objects by dotted name (booleans and lists left out)."""
    out: dict[str, float] = {}
    if isinstance(data, Mapping):
        for key, value in data.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, Mapping):
                out.update(flatten_numbers(value, name))
            elif isinstance(value, int | float) and not isinstance(value, bool) and \
                    math.isfinite(value):
                out[name] = float(value)
    return out


def flatten_values(data: object, prefix: str = "") -> dict[str, object]:
    """Every leaf of nested objects by dotted name (lists kept whole, as values)."""
    out: dict[str, object] = {}
    if isinstance(data, Mapping):
        for key, value in data.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, Mapping) and value:
                out.update(flatten_values(value, name))
            else:
                out[name] = value
    return out


def compare_snapshots(a: Snapshot, b: Snapshot,
                      figures: Mapping[str, Sequence[str]] | None = None,
                      headlines: Mapping[str, Sequence[Headline]] | None = None) -> Comparison:
    """The comparison of `a` and `b`. `figures` may name, per lab id, the figures to list
    (dotted names; default: every number in the lab's metrics); `headlines`, per lab id, the
    figures the lab shows (its registry entry's): their rows first, lab by lab."""
    labs_a, labs_b = _labs(a), _labs(b)
    both = tuple(lab for lab in labs_a if lab in labs_b)
    first: list[FigureRow] = []
    rest: list[FigureRow] = []
    settings: list[Difference] = []
    for lab in both:
        fa = flatten_numbers(_part(labs_a[lab], "metrics"))
        fb = flatten_numbers(_part(labs_b[lab], "metrics"))
        names = list(figures[lab]) if figures and lab in figures else \
            list(dict.fromkeys([*fa, *fb]))
        heads, others = figure_rows(lab, fa, fb, names, (headlines or {}).get(lab, ()))
        first += heads
        rest += others
        settings.extend(_differences(lab, _part(labs_a[lab], "settings"),
                                     _part(labs_b[lab], "settings")))
    host = _differences("host", a.host, b.host)
    if a.app_version != b.app_version:
        host.insert(0, Difference("app_version", "app_version", a.app_version, b.app_version))
    return Comparison(rows=(*first, *sorted(rest, key=_moved)), settings=tuple(settings),
                      host=tuple(host), labs=both,
                      only_in_a=tuple(lab for lab in labs_a if lab not in labs_b),
                      only_in_b=tuple(lab for lab in labs_b if lab not in labs_a))


def figure_rows(lab: str, fa: Mapping[str, float], fb: Mapping[str, float],
                names: Sequence[str], headlines: Sequence[Headline] = ()
                ) -> tuple[list[FigureRow], list[FigureRow]]:
    """(the headline rows in `headlines`' order, the other rows in `names`' order) of the
    figures `names` of one lab; a headline neither side holds has no row."""
    heads: list[FigureRow] = []
    taken: set[str] = set()
    for h in headlines:
        for name, label in h.matches(names):
            if name not in taken:
                taken.add(name)
                heads.append(FigureRow(lab, name, fa.get(name), fb.get(name), label, h.unit,
                                       h.better, headline=True))
    return heads, [FigureRow(lab, name, fa.get(name), fb.get(name))
                   for name in names if name not in taken]


def _labs(snapshot: Snapshot) -> dict:
    return snapshot.labs if isinstance(snapshot.labs, Mapping) else {}


def _part(section: object, part: str) -> object:
    return section.get(part) if isinstance(section, Mapping) else None


def _moved(row: FigureRow) -> tuple[int, float]:
    """Sort key: rows with a ratio first, the furthest moved (|log ratio|) first."""
    ratio = row.b_over_a
    if ratio is None or ratio <= 0:
        return (1, 0.0)
    return (0, -abs(math.log(ratio)))


def _differences(where: str, a: object, b: object) -> list[Difference]:
    va, vb = flatten_values(a), flatten_values(b)
    return [Difference(where, name, va.get(name), vb.get(name))
            for name in dict.fromkeys([*va, *vb]) if va.get(name) != vb.get(name)]


# ---- bounds: --fail-if ---------------------------------------------------------------------

_BOUND = re.compile(r"^\s*((?:[a-z][a-z0-9_]*:)?[A-Za-z_][\w.]*)\s*(<=|>=|<|>)\s*"
                    r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_OPS = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y,
        ">": lambda x, y: x > y, ">=": lambda x, y: x >= y}


@dataclass(frozen=True)
class Bound:
    """B / A of `figure` fails when `b_over_a op value` holds."""

    figure: str
    op: str
    value: float
    text: str


def parse_bound(text: str) -> Bound:
    """'FIGURE OP NUMBER' (OP one of < <= > >=); FIGURE a figure's dotted name (in every lab
    that has it), or 'lab:figure' for one lab's. ValueError naming the text otherwise."""
    match = _BOUND.match(text)
    if not match:
        raise ValueError(f"--fail-if {text!r}: expected 'FIGURE < NUMBER' (or <=, >, >=), "
                         "FIGURE a figure's name as `inferlab compare` lists it")
    return Bound(match.group(1), match.group(2), float(match.group(3)), text.strip())


def failed_bounds(comparison: Comparison, bounds: Iterable[Bound]) -> list[str]:
    """One message per bound that fails, or names no figure with a ratio in `comparison`."""
    messages = []
    for bound in bounds:
        rows = [r for r in comparison.rows if _names(r, bound.figure)]
        ratios = [(r, r.b_over_a) for r in rows if r.b_over_a is not None]
        if not ratios:
            messages.append(f"{bound.text}: no figure {bound.figure!r} with a ratio in both "
                            "snapshots")
            continue
        for row, ratio in ratios:
            if _OPS[bound.op](ratio, bound.value):
                messages.append(f"{bound.text}: {row.lab}:{row.figure} B / A = {ratio:.4g}")
    return messages


def _names(row: FigureRow, figure: str) -> bool:
    if ":" in figure:
        lab, name = figure.split(":", 1)
        return row.lab == lab and row.figure == name
    return row.figure == figure
