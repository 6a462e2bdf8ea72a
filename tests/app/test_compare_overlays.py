"""The comparison window's Plots tab and the reports' overlaid plots: two real batching runs
(static, continuous) drawn one over the other, embedded as PNG in the window's report and in
`inferlab report A --compare B`; a lab without plots leaves a note, not an image."""

from __future__ import annotations

import base64
import html.parser

from inferlab.app.cli import main
from inferlab.app.report import build_report
from inferlab.engines.trace.compare import compare_snapshots
from inferlab.engines.trace.snapshot import lab_section, make_snapshot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Figures(html.parser.HTMLParser):
    """Every embedded image's PNG bytes and caption, and the page's notes."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[tuple[str, bytes]] = []
        self.alt = ""
        self.notes: list[str] = []
        self._in_note = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append((attrs["alt"], base64.b64decode(attrs["src"].split(",", 1)[1])))
        self._in_note = tag == "p" and attrs.get("class") == "note"

    def handle_data(self, data):
        if self._in_note:
            self.notes.append(data)
            self._in_note = False


def figures(page: str) -> Figures:
    f = Figures()
    f.feed(page)
    return f


def run_pair(tmp_path):
    a, b = tmp_path / "static.json", tmp_path / "continuous.json"
    for policy, path in (("static", a), ("continuous", b)):
        assert main(["run", "batching", "--policy", policy, "--requests", "20",
                     "--snapshot", str(path)]) == 0
    return a, b


def test_the_window_has_a_plots_tab_and_its_report_embeds_them(qtbot, tmp_path, capsys):
    from inferlab.app.compare_window import CompareWindow

    a, b = run_pair(tmp_path)
    capsys.readouterr()
    window = CompareWindow(a, b)
    qtbot.addWidget(window)
    assert [window.tabs.tabText(i) for i in range(2)] == ["Figures", "Plots (5)"]
    (lab,) = window.plots.labs
    assert lab.lab.lab == "batching" and len(lab.plots) == 5
    ttft = lab.plots[0].record
    assert [c.side for c in ttft.curves] == ["A", "B"]
    assert ttft.side("A")[0].x.max() > ttft.side("B")[0].x.max()  # static waits longer
    page = window.export_report(tmp_path / "r.html").read_text()
    ((caption, png),) = figures(page).images
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    assert "A = static.json and B = continuous.json overlaid" in caption


def test_the_report_command_embeds_the_overlaid_plots(tmp_path, monkeypatch, capsys):
    import inferlab.app.commands.report as command

    a, b = run_pair(tmp_path)
    monkeypatch.setattr(command, "_images", lambda *args: {})  # the labs' pages: not here
    out = tmp_path / "r.html"
    assert main(["report", str(a), "--compare", str(b), "--out", str(out)]) == 0
    ((caption, png),) = figures(out.read_text()).images
    assert png.startswith(PNG_MAGIC) and "The batching lab's plots" in caption
    assert main(["report", str(a), "--compare", str(b), "--out", str(out), "--no-images"]) == 0
    assert figures(out.read_text()).images == []


def test_a_lab_without_plots_leaves_a_note_in_the_report():
    snap = make_snapshot("0.1.0", {}, [], {"kv": lab_section({}, {}, {"steps": 0})},
                         created_utc="2026-12-02T00:00:00+00:00")
    page = build_report(snap, "a.json", None, snap, "b.json", None,
                        compare_snapshots(snap, snap),
                        overlays={"kv": "nothing to draw: neither snapshot holds a run"})
    f = figures(page)
    assert f.images == []
    assert "Plots of A and B overlaid: nothing to draw: neither snapshot holds a run" in f.notes
