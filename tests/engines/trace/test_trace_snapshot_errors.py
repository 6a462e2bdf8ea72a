"""Every way a snapshot file can be bad ends in a SnapshotError naming the file and field."""

import copy
import json

import pytest

from inferlab.engines.trace.snapshot import (
    SnapshotError,
    lab_section,
    loads_snapshot,
    make_snapshot,
    read_snapshot,
    snapshot_to_dict,
)


def good_document() -> dict:
    snap = make_snapshot(
        app_version="0.1.0",
        host={"hostname": "h"},
        devices=[{"id": "cpu"}],
        labs={"kv": lab_section({"block_size": 16}, {"free": 3}, {"hit_rate": 0.5})},
        trace_events=[
            {
                "name": "process_name",
                "ph": "M",
                "ts": 0,
                "pid": 1,
                "tid": 0,
                "args": {"name": "InferLab"},
            },
            {"name": "step", "ph": "X", "ts": 10.0, "dur": 5.0, "pid": 1, "tid": 1},
        ],  # fmt: skip
        active_lab="kv",
        created_utc="2025-06-01T12:00:00+00:00",
    )
    return snapshot_to_dict(snap)


def edit(fn):
    """A document from `fn(doc)` applied to a deep copy of the good document."""
    doc = copy.deepcopy(good_document())
    fn(doc)
    return doc


def set_in(*keys_and_value):
    *keys, value = keys_and_value

    def fn(doc):
        target = doc
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return fn


def delete(*keys):
    def fn(doc):
        target = doc
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return fn


def mutate_labs(fn_on_labs):
    return lambda doc: fn_on_labs(doc["inferlab"]["labs"])


BAD_DOCUMENTS = {
    "top level list": ([{"ph": "X"}], "expected a JSON object"),
    "missing traceEvents": (edit(delete("traceEvents")), "missing 'traceEvents'"),
    "missing inferlab": (edit(delete("inferlab")), "missing 'inferlab'"),
    "inferlab not object": (edit(set_in("inferlab", [])), "'inferlab' is a list"),
    "missing schema": (edit(delete("inferlab", "schema")), "inferlab.schema is missing"),
    "wrong schema": (
        edit(set_in("inferlab", "schema", "perfetto/1")),
        "inferlab.schema is 'perfetto/1', not a supported schema; this InferLab reads "
        "inferlab.snapshot/1",
    ),
    "newer schema": (
        edit(set_in("inferlab", "schema", "inferlab.snapshot/2")),
        "'inferlab.snapshot/2': written by a newer InferLab",
    ),
    "events not list": (edit(set_in("traceEvents", {"a": 1})), "traceEvents is an object"),
    "event not object": (edit(set_in("traceEvents", 1, "oops")), "traceEvents[1] is a string"),
    "event without ph": (edit(delete("traceEvents", 1, "ph")), "traceEvents[1] has no 'ph'"),
    "X without ts": (edit(delete("traceEvents", 1, "ts")), "'X' span without a numeric 'ts'"),
    "X without dur": (edit(delete("traceEvents", 1, "dur")), "'X' span without a numeric 'dur'"),
    "X string dur": (edit(set_in("traceEvents", 1, "dur", "5")), "without a numeric 'dur'"),
    "X bool dur": (edit(set_in("traceEvents", 1, "dur", True)), "without a numeric 'dur'"),
    "X negative dur": (edit(set_in("traceEvents", 1, "dur", -1)), "traceEvents[1].dur is negative"),
    "string ts": (edit(set_in("traceEvents", 0, "ts", "0")), "traceEvents[0].ts is a string"),
    "missing app_version": (edit(delete("inferlab", "app_version")), "inferlab.app_version"),
    "bad created_utc": (
        edit(set_in("inferlab", "created_utc", "yesterday")),
        "inferlab.created_utc is 'yesterday', expected an ISO 8601",
    ),
    "host not object": (edit(set_in("inferlab", "host", "h")), "inferlab.host is a string"),
    "devices not list": (edit(set_in("inferlab", "devices", {})), "inferlab.devices is an object"),
    "device not object": (edit(set_in("inferlab", "devices", [3])), "inferlab.devices[0]"),
    "missing active_lab": (edit(delete("inferlab", "active_lab")), "inferlab.active_lab is missing"),
    "active_lab number": (edit(set_in("inferlab", "active_lab", 3)), "inferlab.active_lab is a number"),
    "labs missing": (edit(delete("inferlab", "labs")), "inferlab.labs is missing"),
    "labs not object": (edit(set_in("inferlab", "labs", ["kv"])), "inferlab.labs is a list"),
    "lab not object": (edit(mutate_labs(lambda labs: labs.update(kv=[]))), "inferlab.labs.kv is a list"),
    "lab missing settings": (
        edit(mutate_labs(lambda labs: labs["kv"].pop("settings"))),
        "inferlab.labs.kv.settings is missing",
    ),
    "lab state not object": (
        edit(mutate_labs(lambda labs: labs["kv"].update(state=[1, 2]))),
        "inferlab.labs.kv.state is a list",
    ),
    "lab metrics null": (
        edit(mutate_labs(lambda labs: labs["kv"].update(metrics=None))),
        "inferlab.labs.kv.metrics is missing or null",
    ),
    "lab id not lowercase": (
        edit(mutate_labs(lambda labs: labs.update(KV=labs.pop("kv")))),
        "lab id 'KV'; lab ids are lowercase identifiers",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_bad_document_names_file_and_field(tmp_path, case):
    document, expected = BAD_DOCUMENTS[case]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(SnapshotError) as info:
        read_snapshot(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_the_good_document_reads():
    loads_snapshot(json.dumps(good_document()))


BAD_TEXTS = {
    "empty": ("", "file is empty"),
    "blank": ("  \n\t", "file is empty"),
    "invalid": ("{not json}", "truncated or not JSON: Expecting property name enclosed in "
                              "double quotes (line 1, column 2)"),
    "second line": ('{"a": 1,\n "b": }', "truncated or not JSON: Expecting value (line 2, column 7)"),
    "NaN": ('{"a": NaN}', "NaN is not valid JSON"),
    "Infinity": ('{"a": -Infinity}', "-Infinity is not valid JSON"),
    "deep": ("[" * 100_000, "nested too deeply"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_TEXTS))
def test_bad_text(tmp_path, case):
    text, expected = BAD_TEXTS[case]
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SnapshotError, match="^" + str(path).replace("\\", "\\\\")) as info:
        read_snapshot(path)
    assert expected in str(info.value)


def test_truncated_file_says_so(tmp_path):
    text = json.dumps(good_document())
    path = tmp_path / "cut.json"
    for cut in (len(text) // 2, len(text) - 1, 1):
        path.write_text(text[:cut], encoding="utf-8")
        with pytest.raises(SnapshotError, match="truncated or not JSON \\(the text ends early\\)"):
            read_snapshot(path)


def test_not_utf8(tmp_path):
    path = tmp_path / "bin.json"
    path.write_bytes(b'{"a": "\xff\xfe"}')
    with pytest.raises(SnapshotError, match="not UTF-8 text"):
        read_snapshot(path)


def test_size_cap(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(good_document()), encoding="utf-8")
    with pytest.raises(SnapshotError, match="over the .* limit for snapshots"):
        read_snapshot(path, max_bytes=100)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(SnapshotError, match="nope.json: cannot read"):
        read_snapshot(path)


def test_loads_names_its_source():
    with pytest.raises(SnapshotError, match="^clipboard: file is empty"):
        loads_snapshot("", source="clipboard")


def test_make_snapshot_refuses_what_would_not_read_back():
    with pytest.raises(SnapshotError, match="lab id 1 is not a string"):
        make_snapshot("0.1.0", {}, [], {1: lab_section()})
    with pytest.raises(SnapshotError, match="lowercase"):
        make_snapshot("0.1.0", {}, [], {"Quant": lab_section()})
    with pytest.raises(SnapshotError, match="inferlab.labs.kv.state is a list"):
        make_snapshot("0.1.0", {}, [], {"kv": {"settings": {}, "state": [], "metrics": {}}})
    with pytest.raises(SnapshotError, match=r"traceEvents\[0\] has no 'ph'"):
        make_snapshot("0.1.0", {}, [], {}, trace_events=[{"ts": 0}])


def test_lab_section_parts_must_be_objects():
    with pytest.raises(TypeError, match="lab state must convert to a JSON object"):
        lab_section(state=[1, 2])
