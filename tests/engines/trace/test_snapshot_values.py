"""Values no snapshot may hold: each ends in a SnapshotError naming the file and the field."""

import json

import pytest

from inferlab.engines.trace.snapshot import (
    SnapshotError,
    lab_section,
    make_snapshot,
    read_snapshot,
    snapshot_to_dict,
)


def document_text() -> str:
    snap = make_snapshot("0.1.0", {"hostname": "h"}, [], {
        "kv": lab_section({"block_size": 16}, {"free": 3}, {"hit_rate": 0.5})},
        trace_events=[{"name": "step", "ph": "X", "ts": 10.0, "dur": 5.0, "pid": 1}],
        active_lab="kv", created_utc="2025-06-01T12:00:00+00:00")
    return json.dumps(snapshot_to_dict(snap))


@pytest.mark.parametrize("old, new, expected", [
    ('"free": 3', '"free": 1e999', "inferlab.labs.kv.state.free is inf, not a finite number"),
    ('"free": 3', '"free": -1e999', "inferlab.labs.kv.state.free is -inf"),
    ('"free": 3', '"free": 1' + "0" * 400, "inferlab.labs.kv.state.free is an integer of 401 "
                                           "digits"),
    ('"free": 3', '"free": 1' + "0" * 5000, "Exceeds the limit (4300 digits)"),
    ('"free": 3', '"free": ' + "[" * 70 + "]" * 70, "inferlab.labs.kv.state.free[0]"),
    ('"free": 3', '"free": NaN', "NaN is not valid JSON"),
    ('"name": "step"', '"name": "\\ud800"', "traceEvents[0].name is a string that is not valid "
                                            "Unicode"),
    ('"free": 3', '"\\udfff": 3', "inferlab.labs.kv.state has a key that is not valid Unicode"),
    ('"schema": "inferlab.snapshot/1"', '"schema": ' + "[" * 60 + "]" * 60,
     "inferlab.schema is a list, not a supported schema"),
    ('"created_utc": "2025-06-01T12:00:00+00:00"', '"created_utc": "' + "9" * 100 + '"',
     "inferlab.created_utc is a string ('9999"),
    ('"dur": 5.0', '"dur": 1e400', "traceEvents[0].dur is inf"),
])
def test_bad_values_name_file_and_field(tmp_path, old, new, expected):
    text = document_text()
    assert old in text
    path = tmp_path / "bad.json"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(SnapshotError) as info:
        read_snapshot(path)
    assert str(info.value).startswith(f"{path}: ") and expected in str(info.value)


def test_nesting_within_the_limit_reads(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(document_text().replace('"free": 3', '"free": ' + "[" * 50 + "]" * 50))
    assert read_snapshot(path).labs["kv"]["state"]["free"][0][0]


def test_the_writer_refuses_what_the_reader_would():
    with pytest.raises(SnapshotError, match="inferlab.labs.kv.state.name is a string that is "
                                            "not valid Unicode"):
        make_snapshot("0.1.0", {}, [], {"kv": lab_section(state={"name": "a\udc80b"})})
    with pytest.raises(SnapshotError, match="is an integer of 400 digits"):
        make_snapshot("0.1.0", {}, [], {"kv": lab_section(metrics={"n": 10**399})})
