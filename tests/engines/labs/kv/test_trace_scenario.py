"""A published trace through the KV lab: arrivals become steps, ids become shared blocks of
the model's own tokens, lengths shrink with the trace's block size."""

from __future__ import annotations

import json

import pytest

from inferlab.app.cli import main
from inferlab.engines.labs.kv.trace_scenario import trace_scenario
from inferlab.engines.serve.traces.record import TraceRequest

ROWS = [(0, 1100, [0, 1, 2]), (500, 1200, [0, 1, 3]), (900, 600, [4, 5]),
        (1500, 1500, [0, 1, 6])]


def test_arrivals_become_steps_and_ids_become_shared_blocks():
    records = [TraceRequest(t / 1000, n, 4, tuple(ids), 16) for t, n, ids in
               [(0, 40, [0, 1, 2]), (120, 38, [0, 1, 3]), (260, 20, [4, 5])]]
    sc = trace_scenario(records, "t.jsonl", vocab_size=1000, block_size=16, step_s=0.05)
    assert [r.spec.arrival_step for r in sc.requests] == [0, 2, 5]
    a, b, c = (r.prompt_ids for r in sc.requests)
    assert [len(a), len(b), len(c)] == [40, 38, 20]
    assert a[:32] == b[:32] and a[32:38] != b[32:38]  # ids 0, 1 shared; 2 and 3 not
    assert a[:16] != c[:16]
    assert sc.scenario.name == "trace" and sc.n_blocks >= 3


def test_bad_step_and_empty_trace_are_named():
    with pytest.raises(ValueError, match="step_s"):
        trace_scenario([TraceRequest(0.0, 4, 4)], "t", 100, step_s=0.0)
    with pytest.raises(ValueError, match="no request"):
        trace_scenario([TraceRequest(0.0, 0, 4)], "t", 100)


def test_run_kv_on_a_trace_hits_what_the_ids_promise(tmp_path, capsys):
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": n,
                                         "output_length": 64, "hash_ids": ids}) + "\n"
                             for t, n, ids in ROWS))
    # 512-token blocks × 1/32 = the pool's 16; a step per 0.1 s: arrivals at steps 0, 5, 9, 15
    assert main(["run", "kv", "--model", "tiny", "--trace", str(trace), "--length-scale",
                 "0.03125", "--step-s", "0.1", "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["trace_format"] == "mooncake" and metrics["trace_requests"] == 4
    # inputs ⌈n/32⌉ = 35, 38, 19, 47; the 2nd and 4th hit ids 0 and 1: 32 tokens each
    expected = (0 + 32 + 0 + 32) / (35 + 38 + 19 + 47)
    assert metrics["trace_hit_rate_unbounded"] == pytest.approx(expected)
    assert metrics["prefix_hit_rate"] == pytest.approx(expected)
