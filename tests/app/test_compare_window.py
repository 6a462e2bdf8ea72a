"""File ▸ Compare snapshots… and File ▸ Export report…: the comparison window's table and
summary, its filter, its report, a bad file refused; the session's report from the window."""

from __future__ import annotations

import html.parser

import pytest

from inferlab.engines.trace.snapshot import (
    SnapshotError,
    lab_section,
    make_snapshot,
    write_snapshot,
)
from tests.app.lab_helpers import wait_idle


def write(path, tokens_per_s: float, cpu: str = "x86", policy: str = "continuous"):
    snap = make_snapshot("0.1.0", {"cpu": cpu}, [], {
        "batching": lab_section({"policy": policy}, {},
                                {"output_tokens_per_s": tokens_per_s, "ttft_s": 0.5}),
        "kv": lab_section({}, {}, {"hit_rate": 0.25})},
        created_utc="2026-12-02T00:00:00+00:00")
    write_snapshot(path, snap)
    return path


def cells(table) -> list[list[str]]:
    return [[table.item(r, c).text() for c in range(table.columnCount())]
            for r in range(table.rowCount())]


def test_the_comparison_window_lists_rows_and_what_differs(make_window, tmp_path):
    window = make_window()
    a = write(tmp_path / "a.json", 100.0, cpu="avx2")
    b = write(tmp_path / "b.json", 150.0, cpu="avx512", policy="static")
    compare = window.compare_snapshots(a, b)
    rows = cells(compare.view.table)
    # the batching lab's headline first, by its label and unit, B / A marked by its direction
    assert rows[0] == ["batching", "output throughput", "tokens/s", "100", "150", "50",
                       "1.5000 ▲ better"]
    assert compare.view.table.item(0, 1).font().bold()
    assert "batching:output_tokens_per_s" in compare.view.table.item(0, 1).toolTip()
    assert ["kv", "hit_rate", "", "0.25", "0.25", "0", "1.0000"] in rows
    summary = compare.view.summary.text()
    assert "Host facts differ" in summary and "avx2 → avx512" in summary
    assert "policy: continuous → static" in summary
    compare.view.filter.setText("HIT")
    assert cells(compare.view.table) == [["kv", "hit_rate", "", "0.25", "0.25", "0", "1.0000"]]
    compare.view.filter.setText("throughput")  # a headline's label filters too
    assert [r[1] for r in cells(compare.view.table)] == ["output throughput"]
    report = compare.export_report(tmp_path / "r.html")
    text = report.read_text()
    assert "output_tokens_per_s" in text and "<script" not in text
    with pytest.raises(ValueError, match="name it .html"):
        compare.export_report(tmp_path / "r.txt")
    compare.close()


def test_a_bad_file_is_refused_before_any_window(make_window, tmp_path):
    window = make_window()
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(SnapshotError, match="bad.json"):
        window.compare_snapshots(write(tmp_path / "a.json", 1.0), bad)
    assert window._compare_windows == []


class _Images(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])


def test_the_sessions_report_holds_the_current_labs_page(qtbot, make_window, tmp_path):
    window = make_window()
    window.show_lab("memory")
    wait_idle(qtbot, window)
    path = window.export_report(tmp_path / "session.html")
    text = path.read_text()
    parser = _Images()
    parser.feed(text)
    assert len(parser.images) == 1 and parser.images[0].startswith("data:image/png;base64,")
    assert "<h2>memory</h2>" in text and "<h2>roofline</h2>" in text


def test_fuzzed_pairs_never_crash_the_view(qtbot, tmp_path):
    """Mutated snapshot pairs that still read: the comparison view draws every one."""
    import random

    from inferlab.engines.trace.compare import compare_snapshots
    from inferlab.engines.trace.snapshot import (
        read_snapshot,
        snapshot_from_dict,
        snapshot_to_dict,
    )
    from inferlab.views.snapshot_compare import SnapshotCompareView
    from tests.fuzz import mutate_value, run_cases, sampled_paths

    base = snapshot_to_dict(read_snapshot(write(tmp_path / "a.json", 3.0)))
    original = snapshot_from_dict(base)
    view = SnapshotCompareView()
    qtbot.addWidget(view)
    rng = random.Random(7)
    paths = sampled_paths(base)

    def case(doc):
        def call():
            other = snapshot_from_dict(doc)
            view.render(compare_snapshots(original, other), "a", "b<&>")
            view.filter.setText(rng.choice(["", "x", "batching:"]))
        return call

    result = run_cases([(label, case(doc)) for label, doc in
                        (mutate_value(base, rng, paths) for _ in range(150))],
                       allowed=(SnapshotError,))
    assert not result.failures, result.failures[:3]
    assert result.ok > 20
