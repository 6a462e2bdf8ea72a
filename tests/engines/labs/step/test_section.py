"""The step lab's section: written, read back equal through JSON, a bad field named; its ops
as Perfetto spans; a Trace tab's trace stored and read back."""

from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from inferlab.engines.labs.step.section import read_step_section, step_section
from inferlab.engines.labs.step.settings import check_step_settings
from inferlab.engines.labs.step.trace import step_trace
from inferlab.engines.profile.op_roofline import Roof as TraceRoof
from inferlab.engines.profile.trace_profile import profile_trace
from inferlab.engines.trace.jsonable import to_jsonable
from inferlab.engines.trace.recorder import TraceRecorder


def _plain(section):
    return json.loads(json.dumps(to_jsonable(section), allow_nan=False))


def test_round_trip(run):
    settings, info, executions = run
    snap = read_step_section(_plain(step_section(settings, info, executions)))
    assert snap.info == info and snap.executions == tuple(executions)
    assert snap.settings == settings


def test_no_run_yet(run):
    settings = run[0]
    snap = read_step_section(_plain(step_section(settings, None, [])))
    assert snap.info is None and snap.executions == ()


@pytest.mark.parametrize("path, value, named", [
    (("state", "executions", 0, "ops", 0, "dur_s"), -1.0, r"ops\[0\]\.dur_s"),
    (("state", "executions", 0, "split", "between_ops_s"), 5.0, "split"),
    (("state", "executions", 0, "execution"), "jit", "execution"),
    (("state", "run", "phase"), "verify", "phase"),
    (("state", "executions", 1, "lanes"), ["thread 0"], "lanes"),
])
def test_bad_field_named(run, path, value, named):
    sec = _plain(step_section(*run))
    at = sec
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    with pytest.raises(ValueError, match=named):
        read_step_section(sec)


def test_each_op_is_a_span(run):
    _settings, _info, executions = run
    recorder = TraceRecorder()
    step_trace(recorder, executions, recorder.now_s())
    spans = [e for e in recorder.events() if e.get("ph") == "X"]
    assert len(spans) == sum(len(r.ops) + 1 for r in executions)
    ops = [e for e in spans if e["cat"] == "op"]
    assert {e["name"] for e in ops} >= {"aten::linear", "native::qkv"}
    assert all(e["dur"] >= 0 for e in spans)


def test_a_trace_round_trips_and_a_bad_one_is_named(tmp_path):
    x, w = torch.randn(4, 32), torch.randn(32, 16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.mm(x, w).relu()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    trace = profile_trace(path, TraceRoof("made up", {"fp32": 1e11, "bf16": 4e11}, 2e10))
    settings = check_step_settings({})
    back = read_step_section(json.loads(json.dumps(step_section(settings, None, [], trace))))
    assert back.info is None and back.trace == trace
    assert back.trace.ops and back.trace.kernels and back.trace.lanes
    sec = json.loads(json.dumps(step_section(settings, None, [], trace)))
    sec["state"]["trace"]["roofline"]["ops"][0]["calls"] = 0
    with pytest.raises(ValueError, match=r"labs\.step\.state\.trace\.roofline\.ops\[0\]\.calls"):
        read_step_section(sec)
    sec = json.loads(json.dumps(step_section(settings, None, [], trace)))
    name = next(iter(sec["state"]["trace"]["kernels"]))
    sec["state"]["trace"]["kernels"][name]["share"] = 2
    with pytest.raises(ValueError, match=r"labs\.step\.state\.trace\.kernels\["):
        read_step_section(sec)
