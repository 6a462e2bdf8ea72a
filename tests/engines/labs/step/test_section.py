"""The step lab's section: written, read back equal through JSON, a bad field named; its ops
as Perfetto spans."""

from __future__ import annotations

import json

import pytest

from inferlab.engines.labs.step.section import read_step_section, step_section
from inferlab.engines.labs.step.trace import step_trace
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
