"""One snapshot (or two compared) as a self-contained HTML report: opens in any browser
without InferLab, nothing fetched — every image is an embedded PNG, the style is inline, and
there is no script.

    header           the snapshot's file, date, InferLab version
    host facts       the machine it ran on (with a comparison: the facts that differ)
    per lab          the lab's page as the window shows it replaying the snapshot (a PNG
                     rendered offscreen; with a comparison A's and B's one above the other,
                     then the lab's plots with A and B overlaid: app/compare_plots.py),
                     its figures (flattened metrics; the lab's headline figures first, by
                     their label and unit, from its registry entry; with a comparison A, B,
                     B - A, B / A, headlines marked better or worse, the rest the furthest
                     moved first), the formulas behind them with the snapshot's numbers
                     (the registry entry's `formulas`; A's and B's side by side) and its
                     settings (or the settings that differ)

`build_report` takes the images already rendered (lab id -> PNG bytes) so that the page is
built, and tested, without Qt; `app/commands/report.py` renders them.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path

from inferlab.app.labs import registry
from inferlab.app.labs.registry import lab_headlines, resolve
from inferlab.engines.trace.atomic import atomic_write_text
from inferlab.engines.trace.compare import (
    Comparison,
    FigureRow,
    Headline,
    figure_rows,
    flatten_numbers,
    flatten_values,
    format_figure,
)
from inferlab.engines.trace.snapshot import Snapshot

STYLE = """
body { font-family: DejaVu Sans, Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.headline td { font-weight: bold; } .name { color: #777; font-weight: normal; }
td.better { color: #007A4D; } td.worse { color: #C0392B; }
td.formula { font-family: DejaVu Sans Mono, monospace; font-size: 12px; }
th { background: #f2f2f2; }
img { max-width: 100%; border: 1px solid #ddd; margin: 4px 0; }
figure { margin: 12px 0; } figcaption { font-size: 13px; color: #444; }
.note { color: #666; font-size: 12px; }
"""


def report_path(path: str | Path) -> Path:
    """`path` as a report's file; ValueError unless it is named .html (or .htm)."""
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"cannot write a report to {path.name!r}: name it .html")
    return path


def write_report(path: str | Path, page: str) -> Path:
    """Write a `build_report` page to `path` (checked by `report_path`), atomically."""
    path = report_path(path)
    atomic_write_text(path, [page])
    return path


def build_report(a: Snapshot, a_name: str, images_a: Mapping[str, bytes] | None = None,
                 b: Snapshot | None = None, b_name: str = "",
                 images_b: Mapping[str, bytes] | None = None,
                 comparison: Comparison | None = None, notes: list[str] | None = None,
                 overlays: Mapping[str, bytes | str] | None = None,
                 headlines: Mapping[str, Sequence[Headline]] | None = None) -> str:
    """The report's HTML. With `b` (and its `comparison` to `a`), a comparison report;
    `notes` are shown under the header (what could not be drawn, and why); `overlays`: lab
    id -> its plots with A and B overlaid as one PNG, or the message why it has none;
    `headlines`: a single snapshot's first figures per lab (default: the registry's; a
    comparison's rows come ordered already)."""
    images_a, images_b = images_a or {}, images_b or {}
    headlines = lab_headlines() if headlines is None else headlines
    title = f"InferLab: {a_name}" + (f" against {b_name}" if b is not None else "")
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>", _header(a, a_name, b, b_name)]
    parts += [f"<p class='note'>{_e(note)}</p>" for note in notes or ()]
    if comparison is None:
        parts.append("<h2>Host</h2>" + _pairs(flatten_values(a.host)))
        for lab, section in _labs(a).items():
            parts.append(f"<h2>{_e(lab)}</h2>")
            parts.append(_image(images_a.get(lab), f"the {lab} lab replaying {a_name}"))
            figures = flatten_numbers(section.get("metrics"))
            heads, rest = figure_rows(lab, figures, {}, list(figures), headlines.get(lab, ()))
            parts.append("<h3>Figures</h3>" + _values_table(heads + rest))
            parts.append(_formulas_table({"": _formulas(lab, section)}))
            parts.append("<h3>Settings</h3>" + _pairs(flatten_values(section.get("settings"))))
    else:
        parts.append(_comparison(comparison, _labs(a), _labs(b), images_a, images_b, a_name,
                                 b_name, overlays or {}))
    parts.append("</body></html>")
    return "\n".join(parts)


def _comparison(c: Comparison, a_labs: Mapping, b_labs: Mapping,
                images_a: Mapping[str, bytes], images_b: Mapping[str, bytes], a_name: str,
                b_name: str, overlays: Mapping[str, bytes | str]) -> str:
    out = ["<h2>Host facts that differ</h2>"]
    out.append(_diff_table(c.host, with_where=False) if c.host else
               "<p>None: both ran on the same host facts and InferLab version.</p>")
    for side, labs in (("A", c.only_in_a), ("B", c.only_in_b)):
        if labs:
            out.append(f"<p>Only in {side}: {_e(', '.join(labs))}</p>")
    for lab in c.labs:
        out.append(f"<h2>{_e(lab)}</h2>")
        out.append(_image(images_a.get(lab), f"A: the {lab} lab replaying {a_name}"))
        out.append(_image(images_b.get(lab), f"B: the {lab} lab replaying {b_name}"))
        overlaid = overlays.get(lab)
        if isinstance(overlaid, str):
            out.append(f"<p class='note'>Plots of A and B overlaid: {_e(overlaid)}</p>")
        else:
            out.append(_image(overlaid, f"The {lab} lab's plots, A = {a_name} and "
                                        f"B = {b_name} overlaid"))
        rows = [r for r in c.rows if r.lab == lab]
        out.append("<h3>Figures</h3><table><tr><th>figure</th><th>unit</th><th>A</th>"
                   "<th>B</th><th>B − A</th><th>B / A</th></tr>")
        for i, r in enumerate(rows):
            out.append(_other_figures(rows, i, 6, ", the furthest moved first"))
            verdict = f" {r.verdict}" if r.verdict else ""
            out.append(f"<tr{_headline(r)}>{_figure_cell(r)}<td>{_e(r.unit or '')}</td>"
                       f"<td class='num'>{_n(r.a)}</td><td class='num'>{_n(r.b)}</td>"
                       f"<td class='num'>{_n(r.b_minus_a)}</td>"
                       f"<td class='num{verdict}'>{_e(r.ratio_text())}</td></tr>")
        out.append("</table>")
        out.append(_formulas_table({"A": _formulas(lab, a_labs.get(lab)),
                                    "B": _formulas(lab, b_labs.get(lab))}))
        diffs = [d for d in c.settings if d.where == lab]
        out.append("<h3>Settings that differ</h3>" +
                   (_diff_table(diffs, with_where=False) if diffs else "<p>None.</p>"))
    return "\n".join(out)


def _headline(row: FigureRow) -> str:
    return " class='headline'" if row.headline else ""


def _figure_cell(row: FigureRow) -> str:
    """A headline by its label, its dotted name beside it; any other figure by its name."""
    if not row.headline:
        return f"<td>{_e(row.figure)}</td>"
    title = f" title='{_e(row.better)} is better'" if row.better else ""
    return (f"<td{title}>{_e(row.label)} <span class='name'>{_e(row.figure)}</span></td>")


def _values_table(rows: Sequence[FigureRow]) -> str:
    """One snapshot's figures: the headlines first (label, name, unit), then the rest."""
    if not rows:
        return "<p class='note'>None recorded.</p>"
    body = "".join(_other_figures(rows, i, 3) +
                   f"<tr{_headline(r)}>{_figure_cell(r)}<td>{_e(r.unit or '')}</td>"
                   f"<td class='num'>{_n(r.a)}</td></tr>" for i, r in enumerate(rows))
    return f"<table><tr><th>figure</th><th>unit</th><th>value</th></tr>{body}</table>"


def _other_figures(rows: Sequence[FigureRow], i: int, columns: int, moved: str = "") -> str:
    """The line between the headlines and the other figures, before the first of those."""
    if not (i and rows[i - 1].headline and not rows[i].headline):
        return ""
    return f"<tr><th colspan='{columns}'>Other figures{moved}</th></tr>"


def _formulas(lab: str, section: object) -> list[tuple[str, str]] | str:
    """(formula, substituted) pairs of the lab's registry hook on `section`; [] for a lab
    without one; the reason as a string where the section does not read."""
    spec = next((s for s in registry.LABS if s.id == lab), None)
    if spec is None or spec.formulas is None:
        return []
    try:
        return list(resolve(spec.formulas)(resolve(spec.read_section)(section)))
    except ValueError as exc:
        return f"the formulas cannot be substituted: {exc}"


def _formulas_table(sides: Mapping[str, list[tuple[str, str]] | str]) -> str:
    """The formulas with each side's numbers ("" one snapshot; "A", "B" a comparison), the
    formulas paired by their text (A's order first)."""
    if not any(sides.values()):
        return ""
    notes = "".join(f"<p class='note'>{_e(k + ': ' if k else '')}{_e(v)}</p>"
                    for k, v in sides.items() if isinstance(v, str))
    pairs = {k: dict(v) for k, v in sides.items() if not isinstance(v, str)}
    formulas = list(dict.fromkeys(f for v in pairs.values() for f in v))
    if not formulas:
        return "<h3>Formulas with the numbers</h3>" + notes
    head = "".join(f"<th>{_e(k) or 'with the numbers'}</th>" for k in pairs)
    body = "".join(f"<tr><td>{_e(f)}</td>" +
                   "".join(f"<td class='formula'>{_e(v.get(f, '–'))}</td>"
                           for v in pairs.values()) + "</tr>" for f in formulas)
    return (f"<h3>Formulas with the numbers</h3>{notes}<table><tr><th>formula</th>{head}"
            f"</tr>{body}</table>")


def _header(a: Snapshot, a_name: str, b: Snapshot | None, b_name: str) -> str:
    rows = [("A" if b is not None else "snapshot", a_name, a.created_utc, a.app_version)]
    if b is not None:
        rows.append(("B", b_name, b.created_utc, b.app_version))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(n)}</td><td>{_e(t)}</td>"
                   f"<td>InferLab {_e(v)}</td></tr>" for k, n, t, v in rows)
    return f"<table>{body}</table>"


def _labs(snapshot: Snapshot) -> dict:
    labs = snapshot.labs if isinstance(snapshot.labs, Mapping) else {}
    return {k: v for k, v in labs.items() if isinstance(v, Mapping)}


def _pairs(values: Mapping[str, object]) -> str:
    if not values:
        return "<p class='note'>None recorded.</p>"
    body = "".join(f"<tr><td>{_e(k)}</td><td class='num'>{_v(v)}</td></tr>"
                   for k, v in values.items())
    return f"<table>{body}</table>"


def _diff_table(diffs, with_where: bool) -> str:
    head = "<tr>" + ("<th>where</th>" if with_where else "") + \
        "<th>name</th><th>A</th><th>B</th></tr>"
    body = "".join("<tr>" + (f"<td>{_e(d.where)}</td>" if with_where else "") +
                   f"<td>{_e(d.name)}</td><td>{_v(d.a)}</td><td>{_v(d.b)}</td></tr>"
                   for d in diffs)
    return f"<table>{head}{body}</table>"


def _image(png: bytes | None, caption: str) -> str:
    if not png:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return (f"<figure><figcaption>{_e(caption)}</figcaption>"
            f"<img alt='{_e(caption)}' src='data:image/png;base64,{data}'></figure>")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _n(value: float | None) -> str:
    return _e(format_figure(value))


def _v(value: object) -> str:
    if isinstance(value, float):
        return _n(value)
    text = str(value)
    return _e(text if len(text) <= 200 else text[:200] + "…")
