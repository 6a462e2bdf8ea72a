"""`inferlab run batching`: a snapshot read_snapshot accepts, whose metrics are summarize() of
the printed per-request timings; bad arguments give one-line errors."""

from __future__ import annotations

import dataclasses
import json

import pytest

from inferlab.engines.labs.batching.records import BatchingSnapshot
from inferlab.engines.labs.batching.section import read_batching_section
from inferlab.engines.serve.metrics import RequestTiming, summarize


def test_run_batching_writes_a_snapshot_matching_its_timings(capsys, tmp_path):
    from inferlab.app.cli import main
    from inferlab.engines.trace.snapshot import read_snapshot

    out = tmp_path / "batching.json"
    assert main(["run", "batching", "--requests", "30", "--snapshot", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["lab"] == "batching"
    metrics = printed["metrics"]
    per_request = metrics["requests"]
    assert len(per_request) == 30
    assert all(len(r["token_times_s"]) == len(r["output_token_ids"]) > 0 for r in per_request)
    timings = [RequestTiming(r["arrival_s"], tuple(r["token_times_s"]), r["prompt_tokens"])
               for r in per_request]
    expected = summarize(timings).to_dict()
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        for p in ("p50", "p90", "p99"):
            assert metrics[key][p] == pytest.approx(expected[key][p])
    assert metrics["output_tokens_per_s"] == pytest.approx(expected["output_tokens_per_s"])
    assert metrics["preemptions"] >= 0

    snapshot = read_snapshot(out)
    assert snapshot.active_lab == "batching"
    record = read_batching_section(snapshot.labs["batching"])
    assert isinstance(record, BatchingSnapshot)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.metrics = {}  # type: ignore[misc]
    settings, requests, iterations = record.settings, record.requests, record.iterations
    section_metrics = record.metrics
    assert settings["requests"] == 30 and len(requests) == 30
    assert record.comparison == () and record.sweep == ()
    assert len(iterations) == section_metrics["iterations"]
    assert section_metrics["ttft_s"] == metrics["ttft_s"]
    spans = [e for e in snapshot.trace_events if e.get("name", "").startswith("iteration ")]
    assert len(spans) == len(iterations)
    # every request on its own named track, its states as spans that never overlap
    names = {e["tid"]: e["args"]["name"] for e in snapshot.trace_events
             if e.get("name") == "thread_name"}
    by_track: dict[str, list[dict]] = {}
    for e in snapshot.trace_events:
        if e.get("cat") == "request":
            by_track.setdefault(names[e["tid"]], []).append(e)
    assert sorted(by_track) == sorted(f"request {r.request_id}" for r in requests)
    for events in by_track.values():
        assert {e["name"] for e in events} <= {"waiting", "prefill", "decode", "preempted",
                                                 "stalled"}
        assert any(e["name"] == "decode" for e in events)
        ordered = sorted(events, key=lambda e: e["ts"])
        # ts and dur are rounded to 1 ns (µs with 3 decimals): allow that much
        assert all(a["ts"] + a["dur"] <= b["ts"] + 0.01
                   for a, b in zip(ordered, ordered[1:], strict=False))
    assert not [e for e in snapshot.trace_events if e.get("name") == "forward"]  # simulated


def test_a_wall_clock_run_traces_schedule_forward_sample_inside_each_iteration(capsys,
                                                                                 tmp_path):
    from inferlab.app.cli import main
    from inferlab.engines.trace.snapshot import read_snapshot

    out = tmp_path / "wall.json"
    assert main(["run", "batching", "--clock", "wall", "--requests", "4",
                 "--snapshot", str(out), "--json"]) == 0
    capsys.readouterr()
    events = read_snapshot(out).trace_events
    iterations = [e for e in events if e.get("name", "").startswith("iteration ")]
    assert iterations
    for it in iterations:
        inside = [e for e in events if e.get("name") in ("schedule", "forward", "sample")
                  and e["tid"] == it["tid"] and it["ts"] - 0.01 <= e["ts"]
                  and e["ts"] + e["dur"] <= it["ts"] + it["dur"] + 0.01]
        assert sorted(e["name"] for e in inside) == ["forward", "sample", "schedule"]


def test_a_mixture_of_experts_model_serves_on_the_wall_clock(capsys):
    """tiny-moe through the serving engine: every request completes; it holds no file codes,
    so no note on dequantizing linears."""
    from inferlab.app.cli import main

    assert main(["run", "batching", "--clock", "wall", "--model", "tiny-moe", "--requests", "3",
                 "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["completed"] == 3 and m["failed"] == 0 and m["total_output_tokens"] > 0
    assert "model_linears" not in m


def test_a_trace_file_is_the_workload(capsys, tmp_path):
    from inferlab.app.cli import main
    from inferlab.engines.serve.workload import WorkloadRequest, write_trace

    trace = tmp_path / "w.jsonl"
    write_trace(trace, [WorkloadRequest(0.1 * i, 20 + i, 5) for i in range(6)])
    out = tmp_path / "b.json"
    assert main(["run", "batching", "--workload", str(trace), "--policy", "static",
                 "--snapshot", str(out), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["completed"] == 6 and metrics["total_output_tokens"] == 30


@pytest.mark.parametrize(("argv", "message"), [
    (["--requests", "0"], "--requests: expected an integer in 1..100,000, got 0"),
    (["--hardware", "abacus"], "--hardware: expected one of"),
    (["--rate", "-1"], "--rate: expected"),
    (["--workload", "missing.jsonl"], "missing.jsonl: cannot read"),
])
def test_bad_arguments_give_one_line_errors(capsys, tmp_path, argv, message):
    from inferlab.app.cli import main

    assert main(["run", "batching", *argv, "--snapshot", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not (tmp_path / "x.json").exists()


def test_without_json_the_summary_is_readable(capsys, tmp_path):
    from inferlab.app.cli import main

    assert main(["run", "batching", "--requests", "25", "--snapshot",
                 str(tmp_path / "b.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.strip().startswith("ttft_s: mean ") and " · p99 " in line for line in lines)
    listed = [line for line in lines if line.strip().startswith("request_id=")]
    assert len(listed) == 20 and "token_times_s=(" in listed[0]  # counts, not 200 numbers
    assert lines[-1].strip() == "… 5 more (--json prints them all)"
    assert max(len(line) for line in lines) < 160
