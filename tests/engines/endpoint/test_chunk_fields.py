"""Wrong values at every field the client reads of a completions and a chat chunk, sent by the
fake server over a real socket: each request ends in success or the client's own named
failure for that request ("chunk 3: `choices[0].text` is a number, not text"), the run goes
on and counts it, nothing raises and nothing hangs. Then seeded random edits of the chunks'
bytes and structure, with the same promise."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from inferlab.engines.endpoint.load import EndpointRun
from inferlab.engines.serve.workload import WorkloadRequest

from .conftest import quick_settings
from .hostile import FIRST_ITEM_WRONG, OBJECTS, TEXT, VALUES, WHOLE, dumps, parent_of, put, show

COMMON_FIELDS = [(), ("error",), ("usage",), ("usage", "prompt_tokens"),
                 ("usage", "completion_tokens"), ("choices",), ("choices", 0),
                 ("choices", 0, "finish_reason")]
FIELDS = {
    "completions": COMMON_FIELDS + [("choices", 0, "text")],
    "chat": COMMON_FIELDS + [("choices", 0, "delta"), ("choices", 0, "delta", "content"),
                             ("choices", 0, "delta", "reasoning_content"),
                             ("choices", 0, "delta", "role")],
}
OUTPUT_TOKENS = 4
_CASE = re.compile(r"\[case:(\d+)\]")


def expect(path: tuple, name: str) -> tuple[str, str]:
    """(outcome, detail): ok, server (its error), data (not a JSON object), or field (the
    path the failure names)."""
    where = show(path)
    if name == "too deep" or (not path and name not in OBJECTS):
        return "data", ""
    if not path:
        return "ok", ""
    if where == "error":
        if name == "null":
            return "ok", ""
        return ("server", "") if name in OBJECTS | TEXT else ("field", where)
    if where in ("usage", "choices[0].delta"):
        return ("ok", "") if name in OBJECTS | {"null"} else ("field", where)
    if where.startswith("usage."):
        return ("ok", "") if name in WHOLE | {"null"} else ("field", where)
    if where == "choices":
        if name in ("null", "empty list"):
            return "ok", ""
        return "field", "choices[0]" if name in FIRST_ITEM_WRONG else "choices"
    if where == "choices[0]":
        return ("ok", "") if name in OBJECTS else ("field", where)
    if where == "choices[0].finish_reason":  # text, but a short one
        return ("ok", "") if name in {"null", "text", "empty text"} else ("field", where)
    return ("ok", "") if name in TEXT | {"null"} else ("field", where)


class Editor:
    """The fake server's edit_chunk: case k (named in the prompt) edits one event of its
    stream; `edited[k]` is that event's index."""

    def __init__(self, edits) -> None:
        self.edits = edits            # k -> (first event index it may edit, edit(chunk))
        self.edited: dict[int, int] = {}

    def __call__(self, req: dict, chat: bool, i: int, chunk: dict):
        found = _CASE.search(str(req.get("prompt", req.get("messages"))))
        k = int(found.group(1)) if found else None
        if k is None or k in self.edited or i < self.edits[k][0]:
            return chunk
        out = self.edits[k][1](chunk)
        if out is None:  # this event lacks the field: try the next one
            return chunk
        self.edited[k] = i
        return out


def run_cases(fake_server, api: str, edits):
    editor = Editor(edits)
    server = fake_server(token_interval_s=0.0, edit_chunk=editor)
    work = [WorkloadRequest(0.0, 16, OUTPUT_TOKENS, prompt=f"[case:{k}] hello")
            for k in range(len(edits))]
    result = EndpointRun(quick_settings(server.url, api=api, model="fake-model", probe=False,
                                        concurrency=32, read_timeout_s=5.0), work).run()
    assert [r.index for r in result.results] == list(range(len(edits)))
    return result, editor.edited


def field_edit(path: tuple, value: object):
    def edit(chunk):
        return dumps(put(chunk, path, value)) if not path or parent_of(chunk, path) is not None \
            else None
    return edit


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_wrong_value_at_any_field_fails_that_request_by_name(fake_server, api):
    cases = [(path, name) for path in FIELDS[api] for name in VALUES]
    # the third event and on: a wrong field after chunks that were fine
    result, edited = run_cases(fake_server, api, [
        (2, field_edit(path, VALUES[name])) for path, name in cases])
    outcomes = Counter()
    for r, (path, name) in zip(result.results, cases, strict=True):
        outcome, detail = expect(path, name)
        outcomes[outcome] += 1
        case = f"{api} {show(path) or '(chunk)'} = {name}: {r.error}"
        assert r.index in edited, case
        if outcome == "ok":
            assert r.ok, case
            assert r.finish_reason == "length", case
        elif outcome == "server":
            assert r.error_kind == "server", case
            assert r.error.startswith("server error mid-stream: "), case
        elif outcome == "data":
            assert r.error_kind == "malformed", case
            assert r.error.startswith("malformed SSE: data is not "), case
        else:
            assert r.error_kind == "malformed", case
            assert r.error.startswith(f"chunk {edited[r.index] + 1}: `{detail}` is "), case
        assert r.error is None or "\n" not in r.error
    assert outcomes["field"] > outcomes["ok"] > 0
    assert result.failures == {k: n for k, n in {
        "malformed": outcomes["field"] + outcomes["data"], "server": outcomes["server"]}.items()
        if n}
    assert result.metrics.completed == outcomes["ok"]
    assert result.metrics.failed == len(cases) - outcomes["ok"]
    by_case = {(show(path), name): r for r, (path, name) in zip(result.results, cases,
                                                               strict=True)}
    text = "choices[0].delta.content" if api == "chat" else "choices[0].text"
    usage_chunk = OUTPUT_TOKENS + (2 if api == "chat" else 1)
    assert by_case[text, "int"].error == f"chunk 3: `{text}` is a number, not text"
    assert by_case[text, "lone surrogate"].error == \
        f"chunk 3: `{text}` is text with a lone surrogate, not Unicode"
    assert by_case["choices", "object"].error == "chunk 3: `choices` is an object, not a list"
    assert by_case["choices[0].finish_reason", "long text"].error == \
        "chunk 3: `choices[0].finish_reason` is text of 100,000 characters, not at most 64"
    for name, why in [("NaN", "NaN, not a count"), ("-Infinity", "-Infinity, not a count"),
                      ("1e400", "Infinity, not a count"), ("true", "true, not a count"),
                      ("fraction", "2.5, not a whole number"),
                      ("negative", "-3, not a count from 0 to 1,000,000,000"),
                      ("huge int", "a 31-digit number, not a count from 0 to 1,000,000,000")]:
        assert by_case["usage.completion_tokens", name].error == \
            f"chunk {usage_chunk}: `usage.completion_tokens` is {why}"
    for name, tokens, source in [("zero", 0, "usage"), ("int", 7, "usage"),
                                 ("whole float", 3, "usage"), ("null", 4, "chunks")]:
        r = by_case["usage.completion_tokens", name]
        assert (r.output_tokens, r.token_source) == (tokens, source)
    assert by_case["error", "text"].error == "server error mid-stream: x"
    assert by_case["error", "int"].error == \
        "chunk 3: `error` is a number, not an object or text"


ALPHABET = [b'"', b"{", b"}", b"[", b"]", b",", b":", b"\\", b"\n", b"\r", b"\xff", b"\xc3",
            b"0", b"9", b"-", b"e", b"N", b" ", b"null", b"true", b"\\ud800", b"1e400"]


def paths_in(obj: object, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths_in(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += paths_in(v, (*path, i))
    return out


def random_edit(rng: random.Random):
    """Either a random field of the event set to a random value, or 1-3 bytes of its JSON
    text inserted, deleted or replaced."""
    if rng.random() < 0.5:
        name = rng.choice(sorted(VALUES))
        pick = rng.random()

        def edit(chunk):
            path = paths_in(chunk)[int(pick * len(paths_in(chunk)))]
            return dumps(put(chunk, path, VALUES[name]))
        return edit
    ops = [(rng.choice("idr"), rng.random(), rng.choice(ALPHABET))
           for _ in range(rng.randint(1, 3))]

    def edit(chunk):
        data = bytearray(dumps(chunk))
        for op, where, piece in ops:
            at = int(where * len(data))
            if op == "i":
                data[at:at] = piece
            elif op == "d":
                del data[at:at + 1]
            else:
                data[at:at + 1] = piece
        return bytes(data)
    return edit


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_seeded_random_edits_end_in_success_or_a_named_failure(fake_server, api):
    rng = random.Random(f"issue-18-{api}")
    n = 150
    last_event = OUTPUT_TOKENS + (1 if api == "chat" else 0)
    edits = [(rng.randint(0, last_event), random_edit(rng)) for _ in range(n)]
    result, edited = run_cases(fake_server, api, edits)
    assert len(edited) == n
    kinds = Counter(r.error_kind for r in result.results)
    assert set(kinds) <= {None, "malformed", "server"}, kinds
    assert kinds[None] > 0 and kinds["malformed"] > 0
    for r in result.results:
        assert r.ok or (r.error and "\n" not in r.error)
    assert result.metrics.completed + result.metrics.failed == n
