"""Fuzzing the snapshot reader: thousands of mutated snapshot files, in-process and seeded.

Every case must end in SnapshotError or a Snapshot that can be written again (plain JSON,
finite numbers, valid UTF-8); any other exception, or a case running past the hang guard,
fails the test and names the case. Mutations: any node of a real snapshot replaced by a bad
value (zero, huge, NaN, the wrong type, ...), deleted, nested thousands deep, or written as
a raw token (1e999, a 5000-digit integer, NaN, Infinity); byte flips; cuts; raw lone
surrogates in the text.
"""

from __future__ import annotations

import json
import random

import pytest

from inferlab.engines.trace.snapshot import (
    SnapshotError,
    lab_section,
    loads_snapshot,
    make_snapshot,
    read_snapshot,
    snapshot_from_dict,
    snapshot_to_dict,
)
from tests.fuzz import json_paths, mutate_json_bytes, run_cases

SEED = 20240602
N_FILE_CASES = 4000
N_TEXT_CASES = 500


def good_document() -> dict:
    """A snapshot with the shapes real ones have: several labs, nested state, every event kind."""
    snap = make_snapshot(
        app_version="0.1.0",
        host={"hostname": "h", "cpu": {"cores": 16, "model": "x"}, "torch": "2.4"},
        devices=[{"id": "cpu", "memory_bytes": 2**36}, {"id": "cuda:0", "sm": [9, 0]}],
        labs={
            "kv": lab_section({"block_size": 16, "policy": "lru"},
                              {"free": 3, "tables": [[0, 1], [2]], "hits": {"a": 0.5}},
                              {"hit_rate": 0.5}),
            "memory": lab_section({"context": 8192, "batch": 4},
                                  {"plan": {"kv_bytes_total": 4 * 2**30, "fits": True,
                                            "decode_tokens_per_s_bound": 1234.5}},
                                  {"weight_bytes": 16 * 10**9}),
        },
        trace_events=[
            {"name": "process_name", "ph": "M", "ts": 0, "pid": 1, "tid": 0,
             "args": {"name": "InferLab"}},
            {"name": "step", "ph": "X", "ts": 10.0, "dur": 5.0, "pid": 1, "tid": 1,
             "args": {"tokens": 3}},
            {"name": "kv_free", "ph": "C", "ts": 12.5, "pid": 1, "args": {"blocks": 7}},
            {"name": "evict", "ph": "i", "ts": 13, "pid": 1, "tid": 1, "s": "t"},
        ],
        active_lab="kv",
        created_utc="2025-06-01T12:00:00+00:00",
    )
    return snapshot_to_dict(snap)


def writes_again(snapshot) -> None:
    """A snapshot read back must be one the writer accepts and UTF-8 can hold."""
    data = snapshot_to_dict(snapshot)
    snapshot_from_dict(data, "<re-read>")
    json.dumps(data, allow_nan=False, ensure_ascii=False).encode("utf-8")


@pytest.mark.slow  # a fuzz campaign: thousands of files written and read
def test_fuzz_snapshot_files(tmp_path):
    doc = good_document()
    paths = json_paths(doc)
    rng = random.Random(SEED)
    path = tmp_path / "case.json"

    def reading(blob: bytes):
        def call():
            path.write_bytes(blob)
            writes_again(read_snapshot(path))
        return call

    def parsing(text: str):
        def call():
            writes_again(loads_snapshot(text, source="<fuzz>"))
        return call

    def cases():
        for _ in range(N_FILE_CASES):
            label, blob = mutate_json_bytes(doc, rng, paths)
            yield label, reading(blob)
        text = json.dumps(doc, ensure_ascii=False)
        for _ in range(N_TEXT_CASES):  # str input: raw surrogates and other code points
            i = rng.randrange(len(text))
            ch = rng.choice(("\ud800", "\udfff", "\x00", "\u2028", "\ufeff", "é", "\U0001f600"))
            yield f"text[{i}] = {ch!r}", parsing(text[:i] + ch + text[i:])

    result = run_cases(cases(), (SnapshotError,))
    print("snapshot fuzz:", result.summary())
    result.check()
    assert result.cases == N_FILE_CASES + N_TEXT_CASES and result.refused > result.cases // 4
