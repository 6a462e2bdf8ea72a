"""Snapshot files: round trip, Chrome-format shape, key order, atomic writes."""

import dataclasses
import json
import os

import numpy as np
import pytest

from inferlab.engines.trace import atomic
from inferlab.engines.trace.recorder import TraceRecorder
from inferlab.engines.trace.snapshot import (
    SCHEMA,
    Snapshot,
    lab_section,
    make_snapshot,
    read_snapshot,
    snapshot_to_dict,
    write_snapshot,
)

CREATED = "2025-06-01T12:00:00+00:00"


@dataclasses.dataclass(frozen=True)
class KvState:
    block_table: np.ndarray
    free_blocks: int
    hit_rate: float


def recorded_events() -> list[dict]:
    now = [0.0]
    rec = TraceRecorder(clock=lambda: now[0])
    now[0] = 0.001
    with rec.span("decode step", cat="engine", args={"batch": 3}):
        now[0] = 0.004
    rec.counter("kv blocks", {"used": 12, "free": 4})
    rec.instant("preempt", args={"request": 2})
    return rec.events()


def example_snapshot() -> Snapshot:
    state = KvState(np.arange(6, dtype=np.int32).reshape(2, 3), 4, float("nan"))
    return make_snapshot(
        app_version="0.1.0",
        host={"hostname": "lab-pc", "os": "Linux", "python": "3.12.3", "cpu": "x86_64"},
        devices=[{"id": "cpu", "name": "CPU", "memory_bytes": np.int64(2**34)}],
        labs={
            "kv": lab_section({"block_size": 16}, state, {"hit_rate": 0.5}),
            "roofline": lab_section(settings={"dtype": "bf16"}),
        },
        trace_events=recorded_events(),
        active_lab="kv",
        created_utc=CREATED,
    )


def test_make_snapshot_converts_payloads():
    snap = example_snapshot()
    assert snap.schema == SCHEMA
    assert snap.devices == ({"id": "cpu", "name": "CPU", "memory_bytes": 2**34},)
    assert snap.labs["kv"] == {
        "settings": {"block_size": 16},
        "state": {"block_table": [[0, 1, 2], [3, 4, 5]], "free_blocks": 4, "hit_rate": None},
        "metrics": {"hit_rate": 0.5},
    }
    assert snap.labs["roofline"] == {"settings": {"dtype": "bf16"}, "state": {}, "metrics": {}}


def test_created_utc_defaults_to_now_in_iso_8601():
    snap = make_snapshot("0.1.0", {}, [], {})
    assert snap.created_utc.endswith("+00:00") and "T" in snap.created_utc


def test_round_trip(tmp_path):
    path = tmp_path / "session.json"
    snap = example_snapshot()
    write_snapshot(path, snap)
    assert read_snapshot(path) == snap
    assert read_snapshot(str(path)) == snap
    assert os.listdir(tmp_path) == ["session.json"]


def test_file_key_order_is_display_unit_then_events(tmp_path):
    path = tmp_path / "s.json"
    write_snapshot(path, example_snapshot())
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{"displayTimeUnit": "ms",\n"traceEvents": [')
    assert text.index('"displayTimeUnit"') < text.index('"traceEvents"') < text.index('"inferlab"')
    assert list(json.loads(text)) == ["displayTimeUnit", "traceEvents", "inferlab"]
    assert list(snapshot_to_dict(example_snapshot())) == list(json.loads(text))


def test_file_is_a_chrome_trace(tmp_path):
    path = tmp_path / "s.json"
    write_snapshot(path, example_snapshot())
    data = json.loads(path.read_text(encoding="utf-8"))  # strict: no NaN anywhere
    assert isinstance(data, dict) and data["displayTimeUnit"] == "ms"
    events = data["traceEvents"]
    assert {e["ph"] for e in events} == {"M", "X", "C", "i"}
    for event in events:
        assert {"ph", "ts", "pid", "tid", "name"} <= set(event)
        assert isinstance(event["ts"], int | float)
    (span,) = [e for e in events if e["ph"] == "X"]
    assert (span["ts"], span["dur"]) == (1000.0, 3000.0)
    meta = {(e["name"], e["args"]["name"]) for e in events if e["ph"] == "M"}
    assert meta == {("process_name", "InferLab"), ("thread_name", "MainThread")}
    info = data["inferlab"]
    assert info["schema"] == "inferlab.snapshot/1"
    assert list(info) == [
        "schema", "app_version", "created_utc", "host", "devices", "active_lab", "labs",
    ]  # fmt: skip
    for section in info["labs"].values():
        assert set(section) == {"settings", "state", "metrics"}


def unwritable_snapshot() -> Snapshot:
    """Valid in shape, but a trace event in the middle holds an object JSON cannot hold."""
    good = example_snapshot()
    events = list(good.trace_events)
    events.insert(3, {"name": "bad", "ph": "i", "ts": 1.0, "pid": 1, "tid": 1,
                      "args": {"x": object()}})  # fmt: skip
    return dataclasses.replace(good, trace_events=tuple(events))


def test_failed_write_midway_keeps_old_file_and_no_temp(tmp_path):
    path = tmp_path / "session.json"
    path.write_text("old contents", encoding="utf-8")
    with pytest.raises(TypeError, match="object"):
        write_snapshot(path, unwritable_snapshot())
    assert path.read_text(encoding="utf-8") == "old contents"
    assert os.listdir(tmp_path) == ["session.json"]


def test_nan_slipped_into_a_record_fails_the_write_cleanly(tmp_path):
    path = tmp_path / "s.json"
    bad = dataclasses.replace(example_snapshot(), host={"x": float("nan")})
    with pytest.raises(ValueError):
        write_snapshot(path, bad)
    assert os.listdir(tmp_path) == []


def test_failed_rename_keeps_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "session.json"
    path.write_text("old contents", encoding="utf-8")

    def refuse(src, dst):
        raise OSError("disk says no")

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(OSError, match="disk says no"):
        write_snapshot(path, example_snapshot())
    assert path.read_text(encoding="utf-8") == "old contents"
    assert os.listdir(tmp_path) == ["session.json"]


def test_overwrite_replaces_old_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text("old", encoding="utf-8")
    write_snapshot(path, example_snapshot())
    assert read_snapshot(path) == example_snapshot()
