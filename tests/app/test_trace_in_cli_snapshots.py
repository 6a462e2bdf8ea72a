"""`inferlab run batching|cluster|kv --trace F … --snapshot S`: the snapshot's settings record
the trace the run replayed (path, the format it was read as, window, time scale, sample; the
KV lab's length scale, step and seed), and read back through the lab's strict settings."""

from __future__ import annotations

import json

import pytest

from inferlab.engines.serve.traces.bench import write_mooncake_jsonl


@pytest.mark.parametrize(("lab", "extra_argv", "extra"), [
    ("batching", ["--requests", "5"], {}),
    ("cluster", [], {}),
    ("kv", ["--model", "tiny", "--length-scale", "0.01", "--step-s", "2"],
     {"length_scale": 0.01, "step_s": 2.0, "seed": 0}),
])
def test_the_snapshot_records_the_trace(tmp_path, lab, extra_argv, extra):
    from inferlab.app.cli import main
    from inferlab.app.labs.registry import lab_spec, resolve
    from inferlab.engines.trace.snapshot import read_snapshot

    trace = tmp_path / "kimi.jsonl"
    write_mooncake_jsonl(trace, 30.0, seed=1)
    snap = tmp_path / "s.json"
    argv = ["run", lab, "--trace", str(trace), "--window", "0:8", "--sample", "6",
            *extra_argv, "--snapshot", str(snap)]
    assert main(argv) == 0
    settings = json.loads(snap.read_text())["inferlab"]["labs"][lab]["settings"]
    assert settings["trace"] == {"path": str(trace), "format": "mooncake", "window": "0:8",
                                 "time_scale": 1.0, "sample": 6, **extra}
    section = read_snapshot(snap).labs[lab]
    resolve(lab_spec(lab).read_section)(section)  # the lab's strict reader takes it
