"""`inferlab report`: a self-contained page (no script, no resource outside it, every image
an embedded PNG that decodes), the snapshot's figures and settings in it, a comparison's
rows, and bad input refused in one line."""

from __future__ import annotations

import base64
import html.parser
import shutil
import subprocess

import pytest

from inferlab.app.cli import main
from inferlab.app.labs.registry import lab_headlines
from inferlab.app.report import build_report
from inferlab.engines.trace.compare import compare_snapshots
from inferlab.engines.trace.snapshot import lab_section, make_snapshot, write_snapshot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
BROWSER_HANG_GUARD_S = 120
"""Only ends a browser that never returns; how long it takes is not what is tested."""


def snap(tokens_per_s: float, policy: str = "continuous", note: str = "plain"):
    return make_snapshot("0.1.0", {"cpu": "x86 <avx2>"}, [], {
        "batching": lab_section({"policy": policy, "note": note}, {},
                                {"output_tokens_per_s": tokens_per_s,
                                 "ttft_s": {"p50": 0.25}})},
        created_utc="2026-12-02T00:00:00+00:00")


class Resources(html.parser.HTMLParser):
    """Every tag, and every attribute that would fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.fetched: list[str] = []
        self.images: list[str] = []
        self.cells: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "data") and value:
                self.fetched.append(value)
                if tag == "img":
                    self.images.append(value)

    def handle_data(self, data):
        if data.strip():
            self.cells.append(data.strip())


def parsed(page: str) -> Resources:
    p = Resources()
    p.feed(page)
    return p


def test_a_snapshot_report_holds_its_figures_settings_and_images_inline():
    png = PNG_MAGIC + b"rest"
    page = build_report(snap(120.5, note="<b>&"), "a.json", {"batching": png})
    p = parsed(page)
    assert "script" not in p.tags and "link" not in p.tags
    assert p.images == ["data:image/png;base64," + base64.b64encode(png).decode()]
    assert all(src.startswith("data:") for src in p.fetched)
    for text in ("output_tokens_per_s", "120.5", "ttft_s.p50", "0.25", "policy",
                 "continuous", "<b>&", "x86 <avx2>"):
        assert text in p.cells, text  # escaped in the page, the text itself when read


def test_a_comparison_report_has_the_rows_and_both_images():
    a, b = snap(100.0), snap(150.0, policy="static")
    page = build_report(a, "a.json", {"batching": PNG_MAGIC + b"A"}, b, "b.json",
                        {"batching": PNG_MAGIC + b"B"},
                        compare_snapshots(a, b, headlines=lab_headlines()))
    p = parsed(page)
    assert len(p.images) == 2
    cells = p.cells
    # a headline (the registry's batching entry): its label, name, unit, and B / A's verdict
    i = cells.index("output throughput")
    assert cells[i: i + 7] == ["output throughput", "output_tokens_per_s", "tokens/s", "100",
                               "150", "50", "1.5000 ▲ better"]
    assert "Settings that differ" in cells and "static" in cells


def test_the_command_writes_a_report_without_images_and_refuses_bad_input(tmp_path, capsys):
    write_snapshot(tmp_path / "a.json", snap(1.0))
    write_snapshot(tmp_path / "b.json", snap(2.0))
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "a.json"), "--compare", str(tmp_path / "b.json"),
                 "--out", str(out), "--no-images"]) == 0
    assert "2.0000 ▲ better" in parsed(out.read_text()).cells
    # the window cannot replay this made-up section: the tables still come, with a note
    assert main(["report", str(tmp_path / "a.json"), "--out", str(out)]) == 0
    cells = parsed(out.read_text()).cells
    assert "output_tokens_per_s" in cells
    assert any("could not be drawn" in c and "missing field" in c for c in cells)
    assert main(["report", str(tmp_path / "a.json"), "--out", str(tmp_path / "r.txt")]) == 2
    assert "name it .html" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{")
    assert main(["report", str(tmp_path / "bad.json"), "--out", str(out)]) == 2
    assert "bad.json" in capsys.readouterr().err


@pytest.mark.slow
def test_the_report_renders_the_labs_pages_and_a_browser_opens_it(tmp_path):
    """The real thing: the batching lab's page rendered offscreen from the snapshot, and,
    where Debian's headless Chromium is installed, the page loaded and painted by it."""
    real = tmp_path / "a.json"
    assert main(["run", "batching", "--requests", "20", "--snapshot", str(real)]) == 0
    out = tmp_path / "r.html"
    assert main(["report", str(real), "--out", str(out)]) == 0
    p = parsed(out.read_text())
    assert len(p.images) == 1
    data = base64.b64decode(p.images[0].split(",", 1)[1])
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    browser = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    if browser is None:
        pytest.skip("no headless Chromium here (Debian: chromium-headless-shell)")
    shot = tmp_path / "page.png"
    run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                          "--enable-logging=stderr", "--v=0", f"--screenshot={shot}",
                          "--window-size=1280,2000", out.as_uri()],
                         capture_output=True, text=True,
                         timeout=BROWSER_HANG_GUARD_S)
    assert shot.exists() and shot.stat().st_size > 10_000, run.stderr[-2000:]
    log = run.stderr
    assert "Failed to load resource" not in log and "Uncaught" not in log, log[-2000:]


def test_a_labs_formulas_come_with_each_snapshots_numbers_and_its_headlines_first():
    from tests.app.lab_sections import memory

    sec = memory()
    four = {**sec, "settings": {**sec["settings"], "batch": 4}}

    def of(section):
        return make_snapshot("0.1.0", {}, [], {"memory": section},
                             created_utc="2026-12-02T00:00:00+00:00")

    cells = parsed(build_report(of(sec), "a.json")).cells
    figures = cells.index("Figures")
    assert cells[figures + 4: figures + 8] == ["weights + KV per GPU", "total_bytes", "bytes",
                                              "17,134,264,320"]  # the first headline
    i = cells.index("KV for the batch = KV per token × context × batch")
    assert cells[i + 1] == "131,072 B × 8,192 × 1 = 1,073,741,824 B (1.00 GiB)"
    a, b = of(sec), of(four)
    page = build_report(a, "a.json", None, b, "b.json", None,
                        compare_snapshots(a, b, headlines=lab_headlines()))
    cells = parsed(page).cells
    i = cells.index("KV for the batch = KV per token × context × batch")
    assert cells[i + 1: i + 3] == ["131,072 B × 8,192 × 1 = 1,073,741,824 B (1.00 GiB)",
                                   "131,072 B × 8,192 × 4 = 4,294,967,296 B (4.00 GiB)"]
    broken = of({**sec, "state": {**sec["state"], "target": "h100"}})
    cells = parsed(build_report(broken, "a.json")).cells
    assert any(c.startswith("the formulas cannot be substituted: labs.memory.state.target")
               for c in cells)
