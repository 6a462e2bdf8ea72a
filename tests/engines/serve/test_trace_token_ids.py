"""Prompt token ids in workload records and JSONL traces: checks, round trips, hostile lines."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from inferlab.engines.serve import workload
from inferlab.engines.serve.workload import (
    MAX_TOKEN_ID,
    MAX_TOKENS,
    WorkloadError,
    WorkloadRequest,
    read_trace,
    write_trace,
)
from tests.engines.serve.trace_fuzz import fuzz_traces
from tests.fuzz import mutate_json_bytes, mutate_value

SEED = 20261202


# ---- the record ---------------------------------------------------------------------------

def test_ids_are_kept_as_a_tuple_of_ints_and_give_the_length():
    r = WorkloadRequest.from_token_ids(0.5, [5, 0, np.int64(7), MAX_TOKEN_ID], 3)
    assert r.prompt_token_ids == (5, 0, 7, MAX_TOKEN_ID)
    assert all(type(t) is int for t in r.prompt_token_ids)
    assert r.prompt_tokens == 4 and r.output_tokens == 3
    assert WorkloadRequest(0.5, 4, 3, prompt_token_ids=[5, 0, 7, MAX_TOKEN_ID]) == r
    assert WorkloadRequest.from_token_ids(0, np.array([1, 2], dtype=np.int32), 1) \
        .prompt_token_ids == (1, 2)
    assert WorkloadRequest(0, 3, 1).prompt_token_ids is None


@pytest.mark.parametrize("ids, message", [
    ([], "field 'prompt_token_ids' must not be empty"),
    ("abc", "field 'prompt_token_ids' must be a list of token ids, got 'abc'"),
    ({"0": 1}, "must be a list of token ids"),
    (7, "must be a list of token ids, got 7"),
    ([1, -1, 2], "field 'prompt_token_ids' item 1 must be a token id in 0..2,147,483,647, "
                 "got -1"),
    ([1, 2**31], "item 1 must be a token id in 0..2,147,483,647, got 2147483648"),
    ([1, True], "item 1 must be an integer token id, got True"),
    ([np.bool_(False)], "item 0 must be an integer token id"),
    ([1, 2.0], "item 1 must be an integer token id, got 2.0"),
    ([1, "2"], "item 1 must be an integer token id, got '2'"),
    ([1, None], "item 1 must be an integer token id, got None"),
    ([[1]], "item 0 must be an integer token id, got [1]"),
    (np.zeros((2, 2), dtype=np.int64), "must be a 1-D array of integers"),
    (np.zeros(3), "must be a 1-D array of integers, got an array of shape (3,) and dtype "
                  "float64"),
])
def test_bad_ids_are_workload_errors_naming_the_field_and_item(ids, message):
    with pytest.raises(WorkloadError) as err:
        WorkloadRequest.from_token_ids(0.0, ids, 4)
    assert message in str(err.value)


def test_a_list_longer_than_max_tokens_is_refused_by_its_length():
    with pytest.raises(WorkloadError, match="must hold at most 10,000,000 ids, got "
                                            "10,000,001"):
        WorkloadRequest.from_token_ids(0.0, [0] * (MAX_TOKENS + 1), 1)


def test_prompt_tokens_must_agree_with_the_ids():
    with pytest.raises(WorkloadError, match=r"field 'prompt_tokens' \(5\) does not match "
                                            r"'prompt_token_ids', which holds 3 ids"):
        WorkloadRequest(0.0, 5, 1, prompt_token_ids=[1, 2, 3])


def test_clipped_cuts_the_ids_with_the_length():
    r = WorkloadRequest.from_token_ids(1.0, range_ids(10), 50, prefix_id=2)
    c = r.clipped(4, 8)
    assert (c.prompt_tokens, c.output_tokens, c.prompt_token_ids) == (4, 8, (0, 1, 2, 3))
    assert (c.arrival_s, c.prefix_id) == (1.0, 2)
    assert r.clipped(100, 100) == r
    plain = WorkloadRequest(0.0, 30, 9).clipped(7, 3)
    assert (plain.prompt_tokens, plain.output_tokens, plain.prompt_token_ids) == (7, 3, None)


def range_ids(n: int) -> list[int]:
    return list(range(n))


# ---- traces ------------------------------------------------------------------------------

def test_trace_round_trip_with_ids(tmp_path):
    rng = np.random.default_rng(SEED)
    reqs = [WorkloadRequest.from_token_ids(i * 0.25, rng.integers(0, 50_000, size=1 + i * 37),
                                           1 + i, prefix_id=i % 3 if i % 2 else None,
                                           prompt="q" if i == 4 else "")
            for i in range(12)]
    reqs.insert(3, WorkloadRequest(0.6, 9, 2))  # a line with a count only, among them
    path = tmp_path / "ids.jsonl"
    write_trace(path, reqs)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["prompt_token_ids"] == list(reqs[0].prompt_token_ids)
    assert lines[0]["prompt_tokens"] == 1  # both written: older readers keep the length
    assert "prompt_token_ids" not in lines[3]
    back = read_trace(path)
    assert back == sorted(reqs, key=lambda r: r.arrival_s)
    assert back[5].prompt_token_ids == reqs[5].prompt_token_ids


def test_a_line_may_give_ids_without_prompt_tokens(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival_s": 0, "prompt_token_ids": [3, 1, 4, 1, 5], '
                    '"output_tokens": 2}\n'
                    '{"arrival_s": 1, "prompt_tokens": 2, "prompt_token_ids": [9, 2], '
                    '"output_tokens": 2}\n'
                    '{"arrival_s": 2, "prompt_tokens": 2, "prompt_token_ids": null, '
                    '"output_tokens": 2}\n')
    a, b, c = read_trace(path)
    assert (a.prompt_tokens, a.prompt_token_ids) == (5, (3, 1, 4, 1, 5))
    assert (b.prompt_tokens, b.prompt_token_ids) == (2, (9, 2))
    assert (c.prompt_tokens, c.prompt_token_ids) == (2, None)


GOOD = '{"arrival_s": 0.5, "prompt_token_ids": [1, 2, 3], "output_tokens": 4}'


@pytest.mark.parametrize("line, message", [
    ('{"arrival_s": 0.5, "prompt_tokens": 4, "prompt_token_ids": [1, 2, 3], '
     '"output_tokens": 4}',
     "ids.jsonl line 3: field 'prompt_tokens' (4) does not match 'prompt_token_ids', "
     "which holds 3 ids"),
    ('{"arrival_s": 0.5, "output_tokens": 4}',
     "line 3: missing field 'prompt_tokens' (or 'prompt_token_ids')"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [], "output_tokens": 4}',
     "line 3: field 'prompt_token_ids' must not be empty"),
    ('{"arrival_s": 0.5, "prompt_token_ids": "1 2 3", "output_tokens": 4}',
     "line 3: field 'prompt_token_ids' must be a list of token ids, got '1 2 3'"),
    ('{"arrival_s": 0.5, "prompt_token_ids": {"a": 1}, "output_tokens": 4}',
     "line 3: field 'prompt_token_ids' must be a list of token ids"),
    ('{"arrival_s": 0.5, "prompt_token_ids": 12, "output_tokens": 4}',
     "line 3: field 'prompt_token_ids' must be a list of token ids, got 12"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [1, -7], "output_tokens": 4}',
     "line 3: field 'prompt_token_ids' item 1 must be a token id in 0..2,147,483,647, got -7"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [1, 99999999999], "output_tokens": 4}',
     "line 3: field 'prompt_token_ids' item 1 must be a token id in 0..2,147,483,647"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [true, 1], "output_tokens": 4}',
     "line 3: field 'prompt_token_ids' item 0 must be an integer token id, got True"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [1, 2.5], "output_tokens": 4}',
     "line 3: field 'prompt_token_ids' item 1 must be an integer token id, got 2.5"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [1, 2.0], "output_tokens": 4}',
     "item 1 must be an integer token id, got 2.0"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [1, "2"], "output_tokens": 4}',
     "item 1 must be an integer token id, got '2'"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [1, null], "output_tokens": 4}',
     "item 1 must be an integer token id, got None"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [[1, 2]], "output_tokens": 4}',
     "item 0 must be an integer token id, got [1, 2]"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [1, 1e999], "output_tokens": 4}',
     "item 1 must be an integer token id, got inf"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [1, NaN], "output_tokens": 4}',
     "line 3: not valid JSON (NaN is not a number JSON allows)"),
    ('{"arrival_s": 0.5, "prompt_token_ids": [1, ' + "1" * 5000 + '], "output_tokens": 4}',
     "line 3: not valid JSON"),
    ('{"arrival_s": 0.5, "prompt_token_ids": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "line 3: "),
    ('{"arrival_s": 0.5, "prompt_tokens": true, "prompt_token_ids": [1], "output_tokens": 4}',
     "line 3: field 'prompt_tokens' must be an integer ≥ 1, got True"),
])
def test_bad_id_lines_name_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "ids.jsonl"
    path.write_text(f"{GOOD}\n\n{line}\n{GOOD}\n")
    with pytest.raises(WorkloadError) as err:
        read_trace(path)
    assert message in str(err.value)


def test_a_trace_line_with_too_many_ids_is_refused_by_the_length(tmp_path, monkeypatch):
    monkeypatch.setattr(workload, "MAX_TOKENS", 1000)  # the real limit is 10M ids
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"arrival_s": 0, "prompt_token_ids": [0] * 1001,
                                "output_tokens": 1}) + "\n")
    with pytest.raises(WorkloadError, match="long.jsonl line 1: field 'prompt_token_ids' "
                                            "must hold at most 1,000 ids, got 1,001"):
        read_trace(path)


# ---- fuzz -------------------------------------------------------------------------------

N_FUZZ_CASES = 1500


def _good_trace() -> list[dict]:
    return [{"arrival_s": 0.0, "prompt_token_ids": [5, 6, 7, 8], "output_tokens": 3},
            {"arrival_s": 0.25, "prompt_tokens": 3, "prompt_token_ids": [5, 6, 9],
             "output_tokens": 2, "prefix_id": 1},
            {"arrival_s": 0.125, "prompt_tokens": 2, "output_tokens": 1},
            {"arrival_s": 3, "prompt_token_ids": [0, 2147483647], "output_tokens": 16,
             "prompt": "hi"}]


def _fuzz_file(rng: random.Random) -> tuple[str, bytes]:
    """A good trace with one line mutated: its JSON text (values, deletions, raw tokens, deep
    nesting, flipped bytes), or its parsed value (lists stretched to thousands of items)."""
    good = _good_trace()
    lines = [json.dumps(obj).encode() for obj in good]
    i = rng.randrange(len(lines))
    if rng.random() < 0.7:
        label, lines[i] = mutate_json_bytes(good[i], rng)
    else:
        label, value = mutate_value(good[i], rng)
        lines[i] = json.dumps(value).encode()
    return f"line {i + 1}: {label}", b"\n".join(lines) + b"\n"


def test_fuzz_mutated_id_traces_end_in_workload_error_or_a_clean_list(tmp_path):
    def ids_ok(r):
        ids = r.prompt_token_ids
        if ids is not None:
            assert type(ids) is tuple and len(ids) == r.prompt_tokens
            assert all(type(t) is int and 0 <= t <= MAX_TOKEN_ID for t in ids)

    result = fuzz_traces(tmp_path, random.Random(SEED), _fuzz_file, N_FUZZ_CASES, ids_ok)
    assert result.ok > 100 and result.refused > 500, result.summary()
