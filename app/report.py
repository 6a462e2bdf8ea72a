"""One snapshot (or two compared) as a self-contained HTML report: opens in any browser
without InferLab, nothing fetched — every image is an embedded PNG, the style is inline, and
there is no script.

    header           the snapshot's file, date, InferLab version
    host facts       the machine it ran on (with a comparison: the facts that differ)
    per lab          the lab's page as the window shows it replaying the snapshot (a PNG
                     rendered offscreen; with a comparison A's and B's one above the other,
                     then the lab's plots with A and B overlaid: app/compare_plots.py),
                     its figures (flattened metrics; with a comparison A, B, B - A, B / A,
                     the furthest moved first) and its settings (or the settings that differ)

`build_report` takes the images already rendered (lab id -> PNG bytes) so that the page is
built, and tested, without Qt; `app/commands/report.py` renders them.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from pathlib import Path

from inferlab.engines.trace.compare import (
    Comparison,
    flatten_numbers,
    flatten_values,
    format_figure,
    format_ratio,
)
from inferlab.engines.trace.snapshot import Snapshot

STYLE = """
body { font-family: DejaVu Sans, Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
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
    from inferlab.engines.trace.atomic import atomic_write_text

    path = report_path(path)
    atomic_write_text(path, [page])
    return path


def build_report(a: Snapshot, a_name: str, images_a: Mapping[str, bytes] | None = None,
                 b: Snapshot | None = None, b_name: str = "",
                 images_b: Mapping[str, bytes] | None = None,
                 comparison: Comparison | None = None, notes: list[str] | None = None,
                 overlays: Mapping[str, bytes | str] | None = None) -> str:
    """The report's HTML. With `b` (and its `comparison` to `a`), a comparison report;
    `notes` are shown under the header (what could not be drawn, and why); `overlays`: lab
    id -> its plots with A and B overlaid as one PNG, or the message why it has none."""
    images_a, images_b = images_a or {}, images_b or {}
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
            parts.append("<h3>Figures</h3>" + _pairs(flatten_numbers(section.get("metrics"))))
            parts.append("<h3>Settings</h3>" + _pairs(flatten_values(section.get("settings"))))
    else:
        parts.append(_comparison(comparison, images_a, images_b, a_name, b_name,
                                 overlays or {}))
    parts.append("</body></html>")
    return "\n".join(parts)


def _comparison(c: Comparison, images_a: Mapping[str, bytes],
                images_b: Mapping[str, bytes], a_name: str, b_name: str,
                overlays: Mapping[str, bytes | str]) -> str:
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
        out.append("<h3>Figures</h3><table><tr><th>figure</th><th>A</th><th>B</th>"
                   "<th>B − A</th><th>B / A</th></tr>")
        for r in rows:
            out.append(f"<tr><td>{_e(r.figure)}</td><td class='num'>{_n(r.a)}</td>"
                       f"<td class='num'>{_n(r.b)}</td><td class='num'>{_n(r.b_minus_a)}</td>"
                       f"<td class='num'>{_e(format_ratio(r.b_over_a))}</td></tr>")
        out.append("</table>")
        diffs = [d for d in c.settings if d.where == lab]
        out.append("<h3>Settings that differ</h3>" +
                   (_diff_table(diffs, with_where=False) if diffs else "<p>None.</p>"))
    return "\n".join(out)


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
