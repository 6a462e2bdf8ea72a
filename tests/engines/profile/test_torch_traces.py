"""The reader on traces torch.profiler itself writes: a 2-layer MLP run 3 times on the CPU.

Checked against the trace read independently (json.load of the same file) and against what
the model must launch: 2 Linear layers × 3 forwards = 6 aten::linear, 3 aten::relu.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest
import torch

from inferlab.app.cli import main
from inferlab.engines.profile.breakdown import breakdown
from inferlab.engines.profile.chrome_trace import read_chrome_trace
from inferlab.engines.profile.kernel_table import kernel_table, level_of

FORWARDS = 3


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory) -> str:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 32))
    x = torch.randn(8, 64)
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.no_grad(), torch.profiler.profile(activities=activities, record_shapes=True,
                                                 with_flops=True) as prof:
        for _ in range(FORWARDS):
            model(x)
    path = tmp_path_factory.mktemp("torch_trace") / "mlp.json"
    prof.export_chrome_trace(str(path))
    return str(path)


def cpu_ops_of(path: str) -> list[dict]:
    """The trace's own cpu_ops, by the standard library's parser."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]


def test_op_counts_and_times_equal_the_traces_own(torch_trace):
    trace = read_chrome_trace(torch_trace)
    own = cpu_ops_of(torch_trace)
    own_calls = Counter(e["name"] for e in own)
    own_total_us = Counter()
    for e in own:
        own_total_us[e["name"]] += e["dur"]
    assert level_of(trace.events) == "cpu"
    rows = {r.name: r for r in kernel_table(trace.events)}
    assert {name: r.calls for name, r in rows.items()} == dict(own_calls)
    for name, r in rows.items():
        assert r.total_s == pytest.approx(own_total_us[name] / 1e6, rel=1e-12)
        assert r.mean_s == pytest.approx(r.total_s / r.calls, rel=1e-12)
    assert sum(r.share for r in rows.values()) == pytest.approx(1.0)
    assert rows["aten::linear"].calls == 2 * FORWARDS
    assert rows["aten::relu"].calls == FORWARDS


def test_recorded_shapes_and_args_are_kept(torch_trace):
    trace = read_chrome_trace(torch_trace)
    addmm = [e for e in trace.events if e.name == "aten::addmm"]
    assert len(addmm) == 2 * FORWARDS
    dims = {tuple(map(tuple, e.args["Input Dims"][:3])) for e in addmm}
    assert dims == {((128,), (8, 64), (64, 128)), ((32,), (8, 128), (128, 32))}
    # every op's args as recorded ("flops" too, where this torch writes it)
    assert [e.args for e in trace.events if e.cat == "cpu_op"] == [
        e.get("args", {}) for e in cpu_ops_of(torch_trace)]


def test_breakdown_of_the_cpu_thread(torch_trace):
    trace = read_chrome_trace(torch_trace)
    ops = cpu_ops_of(torch_trace)
    lanes = breakdown(trace.events, trace.thread_names)
    assert {(lane.pid, lane.tid) for lane in lanes} == {(e["pid"], e["tid"]) for e in ops}
    for lane in lanes:
        mine = [e for e in ops if (e["pid"], e["tid"]) == (lane.pid, lane.tid)]
        span_us = max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)
        assert lane.kind == "thread" and lane.events == len(mine)
        assert lane.span_s == pytest.approx(span_us / 1e6)
        assert lane.communication_s == 0.0 and lane.memory_s == 0.0
        assert lane.compute_s + lane.idle_s == pytest.approx(lane.span_s)
        assert 0 < lane.compute_s <= sum(e["dur"] for e in mine) / 1e6  # nested ops once


def test_gzip_and_bare_array_forms_read_the_same(torch_trace, tmp_path):
    plain = read_chrome_trace(torch_trace)
    data = open(torch_trace, "rb").read()
    gz = tmp_path / "mlp.json.gz"
    gz.write_bytes(gzip.compress(data))
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(json.loads(data)["traceEvents"]))
    for other in (read_chrome_trace(gz), read_chrome_trace(bare)):
        assert other.events == plain.events
        assert other.thread_names == plain.thread_names
    assert read_chrome_trace(gz).bytes_read == gz.stat().st_size


def test_progress_reports_bytes_read(torch_trace):
    seen = []
    read_chrome_trace(torch_trace, progress=lambda fraction, message: seen.append(fraction))
    assert seen and seen[-1] == 1.0 and all(0 <= f <= 1 for f in seen)


def test_cli_profile_open_json(torch_trace, capsys):
    assert main(["profile", "open", torch_trace, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["level"] == "cpu"
    assert out["kernels"]["aten::linear"]["calls"] == 2 * FORWARDS
    assert set(out["kernels"]["aten::addmm"]) == {"calls", "total_s", "mean_s", "share"}
    for lane in out["breakdown"].values():
        assert {"compute_s", "memory_s", "communication_s", "idle_s"} <= set(lane)


def test_cli_profile_open_table(torch_trace, capsys):
    assert main(["profile", "open", torch_trace]) == 0
    out = capsys.readouterr().out
    assert "aten::linear" in out and "idle" in out
