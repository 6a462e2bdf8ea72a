"""A file that is not a whole, well-typed trace gives TraceReadError naming the file, the event
and the field, and nothing else; a seeded fuzz of the reader finds no other outcome."""

from __future__ import annotations

import gzip
import json
import random

import msgspec
import pytest

from inferlab.app.cli import main
from inferlab.engines.profile.bench import write_trace
from inferlab.engines.profile.chrome_trace import MAX_DEPTH, TraceReadError, read_chrome_trace
from inferlab.engines.profile.json_split import EventSplitter
from tests.fuzz import json_paths, mutate_json_bytes, run_cases

SEED = 20260544
N_CASES = 1500


def good_document() -> dict:
    return {"schemaVersion": 1, "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5,
         "dur": 30.25, "args": {"Input Dims": [[8, 64], [64, 128]],
                                "Input type": ["float", "float"], "flops": 131072}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 5,
         "args": {"stream": 7}},
        {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g"},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH", "pid": 0, "tid": 7, "ts": 30,
         "dur": 2},
    ]}


def write(tmp_path, text: str | bytes, name="trace.json") -> str:
    path = tmp_path / name
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return str(path)


def with_event(index: int, **fields) -> str:
    doc = good_document()
    doc["traceEvents"][index] = {**doc["traceEvents"][index], **fields}
    return json.dumps(doc)


@pytest.mark.parametrize("text, index, field", [
    (with_event(2, ts="10.5"), 2, "ts"),
    (with_event(3, dur=-1), 3, "dur"),
    (with_event(3, dur=None), 3, "dur"),
    (with_event(2, name=7), 2, "name"),
    (with_event(2, pid=1.5), 2, "pid"),
    (with_event(2, tid=True), 2, "tid"),
    (with_event(2, args=[1]), 2, "args"),
    (with_event(1, args={"name": 3}), 1, "args.name"),
    (with_event(4, ph=3), 4, "ph"),
    (json.dumps({"traceEvents": [1]}), 0, "event"),
    (json.dumps({"traceEvents": {"a": 1}}), None, "traceEvents"),
    (json.dumps({"traceEvents": 3}), None, "traceEvents"),
    (json.dumps({"events": []}), None, "traceEvents"),
    ('"a string"', None, "json"),
    ("", None, "json"),
])
def test_wrongly_typed_traces_name_the_event_and_field(tmp_path, text, index, field):
    path = write(tmp_path, text)
    with pytest.raises(TraceReadError) as err:
        read_chrome_trace(path)
    assert (err.value.path, err.value.index, err.value.field) == (path, index, field)
    assert path in str(err.value) and field in str(err.value)


def test_an_empty_event_list_is_an_empty_trace(tmp_path):
    assert read_chrome_trace(write(tmp_path, '{"traceEvents": []}')).events == ()
    assert read_chrome_trace(write(tmp_path, "[]")).events == ()


def test_truncated_trace(tmp_path):
    text = json.dumps(good_document())
    for cut in (len(text) - 1, len(text) // 2, 15):
        with pytest.raises(TraceReadError, match="json"):
            read_chrome_trace(write(tmp_path, text[:cut]))
    bare = json.dumps(good_document()["traceEvents"])
    with pytest.raises(TraceReadError):  # the closing ] is not optional here
        read_chrome_trace(write(tmp_path, bare[:-1]))


def test_gzip_corrupted_and_cut(tmp_path):
    blob = gzip.compress(json.dumps(good_document()).encode())
    assert len(read_chrome_trace(write(tmp_path, blob, "t.json.gz")).events) == 3
    corrupt = bytearray(blob)
    corrupt[len(blob) // 2] ^= 0xFF
    for bad in (bytes(corrupt), blob[: len(blob) - 9], blob[:12]):
        with pytest.raises(TraceReadError) as err:
            read_chrome_trace(write(tmp_path, bad, "t.json.gz"))
        assert err.value.field in ("gzip", "json")


def test_cli_says_one_line(tmp_path, capsys):
    path = write(tmp_path, with_event(2, ts="x"))
    assert main(["profile", "open", path]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "event 2: ts" in err


def test_generated_bench_trace_reads_back(tmp_path):
    path = str(tmp_path / "bench.json")
    count = write_trace(path, 200_000)
    doc = json.load(open(path))
    assert len(doc["traceEvents"]) == count
    trace = read_chrome_trace(path)
    assert len(trace.events) == sum(e["ph"] == "X" for e in doc["traceEvents"])
    assert trace.thread_names[(0, 7)] == "stream 7"


@pytest.mark.slow  # a fuzz campaign
def test_fuzz_trace_reader(tmp_path):
    doc = good_document()
    paths = json_paths(doc)
    rng = random.Random(SEED)
    path = tmp_path / "case.json"

    def reading(blob: bytes):
        def call():
            path.write_bytes(blob)
            trace = read_chrome_trace(path)
            for e in trace.events:  # what came back is whole and well-typed
                assert isinstance(e.name, str) and isinstance(e.cat, str)
                assert e.dur_us >= 0 and e.end_us >= e.ts_us
        return call

    cases = []
    for i in range(N_CASES):
        label, blob = mutate_json_bytes(doc, rng, paths)
        if i % 5 == 0:
            blob = gzip.compress(blob)
            if i % 10 == 0:  # and a byte of the gzip stream flipped
                blob = bytearray(blob)
                blob[rng.randrange(len(blob))] = rng.randrange(256)
                blob = bytes(blob)
            label = "gzip " + label
        cases.append((label, reading(blob)))
    result = run_cases(cases, allowed=(TraceReadError,))
    result.check()
    assert result.ok > N_CASES // 10 and result.refused > N_CASES // 10, result.summary()


def test_deep_nesting_is_refused_before_the_parser_sees_it(tmp_path):
    # refused by the splitter's count, before a parser recurses 100,000 levels
    deep = '{"traceEvents": [{"ph": "X", "args": ' + "[" * 100_000 + "]" * 100_000 + "}]}"
    with pytest.raises(TraceReadError, match="nested deeper"):
        read_chrome_trace(write(tmp_path, deep))


def test_brackets_and_escaped_quotes_inside_strings_do_not_nest(tmp_path):
    name = 'a\\"[[{' * 50 + "\\\\"  # escaped quotes, brackets, a trailing escaped backslash
    doc = {"traceEvents": [{"ph": "X", "name": name, "cat": "cpu_op", "ts": 1, "dur": 2,
                            "pid": 1, "tid": 1, "args": {"s": "[" * 200}}]}
    (event,) = read_chrome_trace(write(tmp_path, json.dumps(doc))).events
    assert event.name == name and event.args == {"s": "[" * 200}


def _nested(rng: random.Random, levels: int):
    """A document `levels` deep whose strings are made of brackets, quotes and backslashes."""
    def text() -> str:
        return "".join(rng.choice('[]{}"\\a,:') for _ in range(rng.randrange(6)))
    if levels == 0:
        return text()
    kids = [_nested(rng, levels - 1)] + [text() for _ in range(rng.randrange(3))]
    rng.shuffle(kids)
    return kids if rng.random() < 0.5 else {text() + str(i): k for i, k in enumerate(kids)}


def _refuse(field: str, problem: str) -> None:
    raise TraceReadError("doc", None, field, problem)


def _chunks(blob: bytes, rng: random.Random):
    size = rng.choice([1, 2, 3, 7, 64, len(blob)])
    return [blob[i:i + size] for i in range(0, len(blob), size)]


def test_the_splitter_counts_nesting_exactly_whatever_the_chunks():
    # nesting is counted on the raw bytes, documents just under and just over the limit,
    # fed in chunks of 1 byte up to all at once: strings full of brackets, quotes, escapes
    rng = random.Random(44)
    for case in range(300):
        levels = MAX_DEPTH + rng.choice([-1, 0, 1])
        blob = json.dumps(_nested(rng, levels)).encode()
        splitter = EventSplitter(MAX_DEPTH, _refuse, bare_list=blob[:1] == b"[")
        try:
            for chunk in _chunks(blob, rng):
                splitter.feed(chunk)
            refused = False
        except TraceReadError:
            refused = True
        assert refused == (levels > MAX_DEPTH), (case, levels)
        if not refused:
            assert (splitter.depth, splitter.in_string, splitter.escape_next) == (0, False,
                                                                                  False)


def test_the_splitter_cuts_between_whole_events_whatever_the_chunks():
    # the runs it yields, parsed, are the document's events in order, and the skeleton is
    # the document with its list emptied: checked against json's own parse
    rng = random.Random(45)
    for case in range(200):
        events = [_nested(rng, rng.randrange(4)) for _ in range(rng.randrange(8))]
        bare = rng.random() < 0.3
        doc = events if bare else {"a" + str(case): _nested(rng, 2), "traceEvents": events,
                                   "z": ["[", "]"]}
        blob = json.dumps(doc, indent=rng.choice([None, 1])).encode()
        splitter = EventSplitter(MAX_DEPTH, _refuse, bare_list=bare)
        got = []
        for chunk in _chunks(blob, rng):
            for run in splitter.feed(chunk):
                parsed = json.loads(b"[" + run.text + b"]")
                assert len(parsed) == run.count
                got.extend(parsed)
        assert got == events, case
        skeleton = json.loads(splitter.finish())
        assert skeleton == ([] if bare else {**doc, "traceEvents": []}), case


def test_a_run_maps_a_byte_to_its_element():
    splitter = EventSplitter(MAX_DEPTH, _refuse, bare_list=True)
    run, last = splitter.feed(b'[{"a": ","}, [1, 2], "x,y", 3]')  # the list closed: its last
    assert (run.count, last.count, last.text) == (3, 1, b" 3")  # element is a run of its own
    text = run.text.decode()
    for element, probe in enumerate(['"a"', "2", "y"]):
        assert run.element_at(text.index(probe)) == element
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(b"[" + run.text + b",]")
