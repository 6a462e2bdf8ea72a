"""`inferlab run endpoint --trace F`: a published trace replayed against a (fake) server. The
server's own clock says when each request came in: each inter-arrival × time scale is kept
(to a tolerance that sending everything at once misses by far); the prompts it received share
text exactly where the trace's block ids are shared, and nowhere else."""

from __future__ import annotations

import json

import pytest

from inferlab.app.cli import main
from inferlab.engines.endpoint.trace_replay import text_workload
from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.traces.scale import scaled
from inferlab.engines.serve.traces.text import prompt_text

BLOCK = 512
# (timestamp ms, input tokens, output tokens, hash ids): requests 0, 1, 3 share blocks 0, 1
ROWS = [(0, 1100, 6, [0, 1, 2]), (150, 1200, 4, [0, 1, 3]), (450, 600, 5, [4, 5]),
        (500, 1030, 3, [0, 1, 6]), (900, 300, 2, [7]), (5000, 10, 2, [8])]
GAP_TOLERANCE_S = 0.04


def _write(path, rows=ROWS) -> None:
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": n,
                                        "output_length": m, "hash_ids": ids}) + "\n"
                            for t, n, m, ids in rows))


def _common_words(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split(), b.split(), strict=False):
        if x != y:
            break
        n += 1
    return n


@pytest.mark.parametrize("time_scale", [2.0, 4.0])
def test_replay_keeps_each_inter_arrival_times_the_time_scale(capsys, tmp_path, fake_server,
                                                              time_scale):
    server = fake_server(token_interval_s=0.001)
    trace = tmp_path / "mooncake.jsonl"
    _write(trace)
    # the window keeps the first five (the sixth comes 5 s in)
    assert main(["run", "endpoint", "--url", server.url, "--trace", str(trace),
                 "--window", "0:1", "--time-scale", str(time_scale), "--scrape-hz", "0",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["metrics"]
    assert (out["trace_format"], out["trace_requests"], out["trace_requests_empty"]) == (
        "mooncake", 5, 0)
    assert out["completed"] == 5 and len(out["requests"]) == 5
    # the server's receive times, in the order of the trace (the probe's "Hello" left out)
    by_prompt = {b["prompt"]: (t, b) for t, b in zip(server.received_s, server.bodies,
                                                     strict=True) if b["prompt"] != "Hello"}
    records = [TraceRequest(t / 1000, n, m, tuple(ids), BLOCK) for t, n, m, ids in ROWS[:5]]
    got = [by_prompt[prompt_text(r, i)] for i, r in enumerate(records)]
    received = [t for t, _ in got]
    expected_gaps = [(b[0] - a[0]) / 1000 * time_scale for a, b in zip(ROWS[:4], ROWS[1:5], strict=True)]
    gaps = [b - a for a, b in zip(received, received[1:], strict=False)]
    assert gaps == pytest.approx(expected_gaps, abs=GAP_TOLERANCE_S)
    assert min(expected_gaps) > 2 * GAP_TOLERANCE_S  # all sent at once would fail
    # each request's length controls are the trace's output length
    assert [b["max_tokens"] for _, b in got] == [m for _, _, m, _ in ROWS[:5]]
    assert [r["output_tokens"] for r in out["requests"]] == [m for _, _, m, _ in ROWS[:5]]


def test_the_server_receives_shared_text_exactly_where_ids_are_shared(tmp_path, fake_server,
                                                                      capsys):
    server = fake_server(token_interval_s=0.001)
    trace = tmp_path / "mooncake.jsonl"
    _write(trace)
    assert main(["run", "endpoint", "--url", server.url, "--trace", str(trace),
                 "--time-scale", "0.01", "--scrape-hz", "0", "--json"]) == 0
    capsys.readouterr()
    prompts = [b["prompt"] for b in server.bodies if b["prompt"] != "Hello"]
    assert len(prompts) == len(ROWS)
    order = {prompt_text(TraceRequest(0.0, n, m, tuple(ids), BLOCK), i): i
             for i, (_, n, m, ids) in enumerate(ROWS)}
    prompts.sort(key=order.__getitem__)  # every prompt the server got is the trace's own
    for i, (_, n, _, ids_i) in enumerate(ROWS):
        assert len(prompts[i].split()) == n
        for j, (_, _, _, ids_j) in enumerate(ROWS):
            if i == j:
                continue
            shared_ids = 0
            while shared_ids < min(len(ids_i), len(ids_j)) and \
                    ids_i[shared_ids] == ids_j[shared_ids]:
                shared_ids += 1
            common = _common_words(prompts[i], prompts[j])
            assert shared_ids * BLOCK <= common < (shared_ids + 1) * BLOCK, (i, j)


def test_empty_requests_are_left_out_and_lengths_scale_with_their_blocks(tmp_path):
    trace = tmp_path / "t.jsonl"
    _write(trace, [(0, 1100, 6, [0, 1, 2]), (10, 0, 5, []), (20, 40, 0, [])])
    records = [TraceRequest(0.0, 1100, 6, (0, 1, 2), BLOCK), TraceRequest(0.01, 0, 5),
               TraceRequest(0.02, 40, 0)]
    requests, figures = text_workload(records, trace)
    assert (figures["trace_requests"], figures["trace_requests_empty"]) == (1, 2)
    assert requests[0].prompt == prompt_text(records[0], 0)
    small = scaled(records[0], input_scale=1 / 64, output_scale=0.5, max_input_tokens=16)
    assert (small.input_tokens, small.block_size, small.output_tokens) == (16, 8, 3)
    small = scaled(records[0], input_scale=1 / 64)
    assert (small.input_tokens, small.block_size) == (18, 8)  # ⌈1100/64⌉; 3 blocks of 8
    assert scaled(records[1], 0.5, 0.5).input_tokens == 0
    with pytest.raises(ValueError, match="length scales"):
        scaled(records[0], input_scale=2)


@pytest.mark.parametrize("extra, message", [
    (["--window", "a:b"], "--window: expected START:END seconds"),
    (["--window", "5:6"], "holds no request (in the window)"),
    (["--workload", "W"], "give a workload file or a trace, not both"),
    (["--trace-format", "azure"], "header has no column 'TIMESTAMP'"),
])
def test_bad_trace_options_are_one_line_errors(capsys, tmp_path, fake_server, extra, message):
    server = fake_server()
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 3, "output_length": 1}\n')
    extra = [str(trace) if a == "W" else a for a in extra]
    assert main(["run", "endpoint", "--url", server.url, "--trace", str(trace), *extra]) != 0
    assert message in capsys.readouterr().err
    assert server.requests == 0
