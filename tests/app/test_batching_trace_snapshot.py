"""The batching lab's snapshot says which trace its run replayed (issue 43): the `trace` setting
written while the Trace tab's "Run the lab on it" is on, null otherwise, read back strictly;
a snapshot from before the field still reads."""

from __future__ import annotations

import copy
import json

import pytest

from inferlab.engines.labs.batching.section import read_batching_section
from inferlab.engines.serve.traces.bench import write_mooncake_jsonl
from tests.app import lab_helpers
from tests.app.lab_helpers import wait_idle


def test_the_snapshot_records_the_replayed_trace(qtbot, make_window, tmp_path):
    window, lab = lab_helpers.open_lab(qtbot, make_window, "batching", 60000, requests=10)
    wait_idle(qtbot, window)
    section = json.loads(json.dumps(lab.snapshot_section()))
    assert section["settings"]["trace"] is None  # the seeded workload
    older = copy.deepcopy(section)
    del older["settings"]["trace"]
    assert read_batching_section(older).settings["trace"] is None

    path = tmp_path / "m.jsonl"
    write_mooncake_jsonl(path, duration_s=20.0)
    lab.view.trace.open_requested.emit(str(path))
    qtbot.waitUntil(lambda: lab.view.trace.replay.isEnabled(), timeout=30000)
    lab.view.trace.replay.setChecked(True)
    qtbot.waitUntil(lambda: lab.session is not None and lab.replaying, timeout=30000)
    wait_idle(qtbot, window)
    used = {"path": str(path), "format": "mooncake", "window": None, "time_scale": 1.0,
            "sample": None}
    section = json.loads(json.dumps(lab.snapshot_section()))
    assert section["settings"]["trace"] == used
    assert read_batching_section(section).settings["trace"] == used

    for trace, field in (({"path": str(path), "time_scale": -1}, "trace.time_scale"),
                         ({"path": str(path), "sample": 0}, "trace.sample"),
                         ({"path": str(path), "format": "jsonl"}, "trace.format"),
                         ([str(path)], "trace")):
        bad = copy.deepcopy(section)
        bad["settings"]["trace"] = trace
        with pytest.raises(ValueError, match=f"labs.batching.settings.{field}"):
            read_batching_section(bad)

    lab.view.trace.replay.setChecked(False)  # the seeded workload again
    qtbot.waitUntil(lambda: lab.session is not None and not lab.replaying, timeout=30000)
    wait_idle(qtbot, window)
    assert lab.snapshot_section()["settings"]["trace"] is None
