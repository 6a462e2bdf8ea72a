"""`inferlab run batching --trace F`: a published trace through the lab, with the ids' own
unbounded-cache hit rate printed beside the run's."""

from __future__ import annotations

import json

import pytest

from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.labs.batching.trace_workload import trace_workload
from inferlab.engines.serve.traces.bench import write_mooncake_jsonl
from inferlab.engines.serve.traces.stream import PROGRESS_ROWS


def test_run_batching_on_a_mooncake_trace(capsys, tmp_path):
    from inferlab.app.cli import main

    trace = tmp_path / "mooncake.jsonl"
    rows = [(0, 1100, [0, 1, 2]), (500, 1200, [0, 1, 3]), (900, 600, [4, 5]),
            (1500, 1500, [0, 1, 6]), (99_000, 5, [7])]
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": n,
                                         "output_length": 8, "hash_ids": ids}) + "\n"
                             for t, n, ids in rows))
    # 100× slower: no two requests overlap; the window leaves the last one out
    assert main(["run", "batching", "--trace", str(trace), "--window", "0:60",
                 "--time-scale", "100", "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["trace_format"] == "mooncake"
    assert metrics["trace_requests"] == 4 == len(metrics["requests"])
    expected = (0 + 1024 + 0 + 1024) / (1100 + 1200 + 600 + 1500)
    assert metrics["trace_hit_rate_unbounded"] == pytest.approx(expected)
    assert metrics["prefix_hit_rate"] == pytest.approx(expected)
    assert [r["arrival_s"] for r in metrics["requests"]] == pytest.approx([0, 50, 90, 150])


@pytest.mark.parametrize("extra, message", [
    (["--window", "a:b"], "--window must be START:END seconds"),
    (["--trace-format", "azure"], "header has no column 'TIMESTAMP'"),
])
def test_bad_trace_options_are_one_line_errors(capsys, tmp_path, extra, message):
    from inferlab.app.cli import main

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 3, "output_length": 1}\n')
    assert main(["run", "batching", "--trace", str(trace), *extra]) != 0
    assert message in capsys.readouterr().err


def test_trace_workload_takes_the_first_requests_and_reports_reading(tmp_path):
    path = tmp_path / "m.jsonl"
    n = write_mooncake_jsonl(path, duration_s=3000.0)  # > PROGRESS_ROWS rows: progress comes
    assert n > PROGRESS_ROWS
    seen = []
    settings = dict(BATCHING_DEFAULTS, clock="simulated")
    items, figures = trace_workload(path, settings, progress=lambda f, m: seen.append((f, m)))
    assert figures["trace_requests"] == len(items) == n and figures["trace_format"] == "mooncake"
    assert seen and all(0.0 < f <= 1.0 for f, _ in seen)
    assert [f for f, _ in seen] == sorted(f for f, _ in seen)
    assert f"{PROGRESS_ROWS:,} rows" in seen[0][1]
    first, _ = trace_workload(path, settings, limit=5)
    assert [i.arrival_s for i in first] == [i.arrival_s for i in items[:5]]
    assert [i.prompt_token_ids for i in first] == [i.prompt_token_ids for i in items[:5]]
