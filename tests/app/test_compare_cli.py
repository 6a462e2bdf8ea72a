"""`inferlab compare A B`: the table, --json's rows, --fail-if's exit status, and a broken
file's one-line error."""

from __future__ import annotations

import json

from inferlab.app.cli import main
from inferlab.engines.trace.snapshot import lab_section, make_snapshot, write_snapshot


def write(path, tokens_per_s: float, policy: str = "continuous"):
    snap = make_snapshot("0.1.0", {"cpu": "x86"}, [], {
        "batching": lab_section({"policy": policy}, {}, {"output_tokens_per_s": tokens_per_s,
                                                         "ttft_p50_s": 0.5})},
        created_utc="2026-12-02T00:00:00+00:00")
    write_snapshot(path, snap)
    return path


def test_json_rows_and_a_passing_bound(tmp_path, capsys):
    a, b = write(tmp_path / "a.json", 100.0), write(tmp_path / "b.json", 120.0, "static")
    assert main(["compare", str(a), str(b), "--json",
                 "--fail-if", "output_tokens_per_s < 0.95"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the batching lab's first headline: its description added to the keys rows always had
    assert out["figures"][0] == {"lab": "batching", "figure": "output_tokens_per_s",
                                 "a": 100.0, "b": 120.0, "b_minus_a": 20.0, "b_over_a": 1.2,
                                 "label": "output throughput", "unit": "tokens/s",
                                 "better": "higher", "headline": True}
    assert out["figures"][1] == {"lab": "batching", "figure": "ttft_p50_s", "a": 0.5,
                                 "b": 0.5, "b_minus_a": 0.0, "b_over_a": 1.0, "label": None,
                                 "unit": None, "better": None, "headline": False}
    assert out["settings_differ"] == [{"where": "batching", "name": "policy",
                                       "a": "continuous", "b": "static"}]
    assert out["failed"] == []


def test_a_failing_bound_exits_1_and_says_which(tmp_path, capsys):
    a, b = write(tmp_path / "a.json", 100.0), write(tmp_path / "b.json", 90.0)
    assert main(["compare", str(a), str(b), "--fail-if", "output_tokens_per_s < 0.95"]) == 1
    captured = capsys.readouterr()
    assert "batching:output_tokens_per_s" in captured.out
    assert "output throughput (tokens/s)" in captured.out and "0.9000 ▼ worse" in captured.out
    assert "failed: output_tokens_per_s < 0.95: batching:output_tokens_per_s B / A = 0.9" \
        in captured.err


def test_a_broken_snapshot_or_bound_is_one_line_and_exit_2(tmp_path, capsys):
    a = write(tmp_path / "a.json", 100.0)
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [')
    assert main(["compare", str(a), str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("inferlab compare: error:") and "broken.json" in err
    assert main(["compare", str(a), str(a), "--fail-if", "x = 1"]) == 2
    assert "expected 'FIGURE < NUMBER'" in capsys.readouterr().err
