"""Window, time scale and sample applied while streaming; a seeded fuzz of every reader; a
1M-row Azure CSV read in bounded memory."""

from __future__ import annotations

import json
import random
import resource

import pytest

from inferlab.engines.serve.traces.bench import write_azure_csv
from inferlab.engines.serve.traces.record import TraceError, TraceRequest
from inferlab.engines.serve.traces.stream import read_trace
from tests.fuzz import flip_bytes, mutate_json_bytes, run_cases, truncate

SEED = 20260043


def _mooncake(tmp_path, times_ms):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": i + 1,
                                        "output_length": 1, "hash_ids": [i]}) + "\n"
                            for i, t in enumerate(times_ms)))
    return path


def test_window_counts_from_the_first_arrival_and_time_scale_stretches_gaps(tmp_path):
    path = _mooncake(tmp_path, [5000, 6000, 7500, 9000, 12000, 20000])
    got = list(read_trace(path, window=(1, 7)))  # 1 s ≤ t − 5 s < 7 s
    assert [(r.arrival_s, r.input_tokens) for r in got] == [(0, 2), (1.5, 3), (3, 4)]
    scaled = list(read_trace(path, window=(1, 7), time_scale=2.0))
    assert [r.arrival_s for r in scaled] == [0, 3, 6]
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(got, got[1:], strict=False)]
    sgaps = [b.arrival_s - a.arrival_s for a, b in zip(scaled, scaled[1:], strict=False)]
    assert sgaps == [2 * g for g in gaps]
    assert list(read_trace(path, window=(100, 200))) == []


def test_a_window_stops_reading_at_its_end(tmp_path):
    path = _mooncake(tmp_path, [0, 1000, 2000, 3000])
    with open(path, "a") as f:
        f.write("not json at all\n")  # after the first row past the window: never read
    assert len(list(read_trace(path, window=(0, 2.5)))) == 3
    with pytest.raises(TraceError, match="m.jsonl line 5"):
        list(read_trace(path))


def test_sample_is_seeded_uniform_and_in_arrival_order(tmp_path):
    path = _mooncake(tmp_path, list(range(0, 100_000, 100)))  # 1000 requests
    a = list(read_trace(path, sample=50, seed=3))
    assert len(a) == 50 and a == list(read_trace(path, sample=50, seed=3))
    assert a != list(read_trace(path, sample=50, seed=4))
    assert [r.arrival_s for r in a] == sorted(r.arrival_s for r in a)
    assert len(list(read_trace(path, sample=5000))) == 1000
    # uniform: each request kept with probability 50/1000, over many seeds
    counts = [0] * 1000
    for seed in range(80):
        for r in read_trace(path, sample=50, seed=seed):
            counts[r.input_tokens - 1] += 1
    first, last = sum(counts[:500]), sum(counts[500:])
    assert abs(first - last) < 0.2 * (first + last)


@pytest.mark.parametrize("kw, message", [
    ({"window": (5, 5)}, "window must be 0 ≤ start < end"),
    ({"window": (-1, 5)}, "window must be"),
    ({"time_scale": 0}, "time_scale must be a finite number > 0"),
    ({"time_scale": float("inf")}, "time_scale must be"),
    ({"sample": 0}, "sample must be an integer"),
])
def test_bad_options(tmp_path, kw, message):
    with pytest.raises(TraceError, match=message):
        list(read_trace(_mooncake(tmp_path, [0]), **kw))


# ---- seeded fuzz of every reader ---------------------------------------------------------------

SAMPLES = {
    "mooncake": "".join(json.dumps({"timestamp": 10 * i, "input_length": 700 + i,
                                    "output_length": 5, "hash_ids": [0, i + 1]}) + "\n"
                        for i in range(4)),
    "bailian": "".join(json.dumps({"chat_id": i, "parent_chat_id": i - 1, "timestamp": i,
                                   "input_length": 30, "output_length": 3, "turn": i + 1,
                                   "type": "text", "hash_ids": [1, 2]}) + "\n"
                       for i in range(4)),
    "azure": "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:4{i}.680590{i},{100 + i},{i + 1}\n" for i in range(4)),
    "burstgpt": "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                + "".join(f"{i},ChatGPT,{10 + i},{i},{10 + 2 * i},API log\n" for i in range(4)),
    "sharegpt": json.dumps([{"id": str(i), "conversations": [
        {"from": "human", "value": "hello there " * (i + 1)},
        {"from": "gpt", "value": "a reply " * (i + 2)}]} for i in range(4)], indent=1),
    "inferlab": "".join(json.dumps({"arrival_s": i, "prompt_tokens": 5, "output_tokens": 2})
                        + "\n" for i in range(4)),
}


def _mutated(fmt: str, rng: random.Random) -> tuple[str, bytes]:
    data = SAMPLES[fmt].encode()
    kind = rng.random()
    if kind < 0.5 and fmt not in ("azure", "burstgpt"):
        lines = SAMPLES[fmt].splitlines(keepends=True) if fmt != "sharegpt" else None
        if lines:
            k = rng.randrange(len(lines))
            label, line = mutate_json_bytes(json.loads(lines[k]), rng)
            return f"line {k + 1}: {label}", b"".join(
                [*(x.encode() for x in lines[:k]), line, b"\n",
                 *(x.encode() for x in lines[k + 1:])])
        label, text = mutate_json_bytes(json.loads(SAMPLES[fmt]), rng)
        return label, text
    if kind < 0.8:
        return flip_bytes(data, rng)
    if kind < 0.9:
        return truncate(data, rng)
    cells = ["-1", "1e999", "9" * 30, "", "x", "nan", "2023-13-01 00:00:00.1", "1" * 5000]
    text = SAMPLES[fmt].splitlines(keepends=True)
    k = rng.randrange(1, len(text))
    parts = text[k].rstrip("\n").split(",")
    parts[rng.randrange(len(parts))] = rng.choice(cells)
    text[k] = ",".join(parts) + "\n"
    return "cell", "".join(text).encode()


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_every_reader_under_a_seeded_fuzz(tmp_path, fmt):
    rng = random.Random(f"{SEED}-{fmt}")
    path = tmp_path / "fuzz.txt"
    assert len(list(read_trace_text(path, SAMPLES[fmt].encode(), fmt))) >= 1

    def case(data: bytes, named: str | None):
        def call():
            for r in read_trace_text(path, data, named):
                assert isinstance(r, TraceRequest)
                assert 0 <= r.input_tokens and 0 <= r.output_tokens
                assert r.arrival_s >= 0
        return call

    cases = []
    for n in range(150):
        label, data = _mutated(fmt, rng)
        named = fmt if n % 2 else None  # half detected from the content
        cases.append((f"case {n} ({label})", case(data, named)))
    result = run_cases(cases, allowed=(TraceError,))
    result.check()


def read_trace_text(path, data: bytes, fmt):
    path.write_bytes(data)
    return list(read_trace(path, fmt))


# ---- a million rows in bounded memory ---------------------------------------------------------

def _rss_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


@pytest.mark.slow
def test_a_million_row_azure_csv_reads_in_bounded_memory(tmp_path):
    path = tmp_path / "azure.csv"
    write_azure_csv(path, 1_000_000)
    before = _rss_peak_bytes()
    n = tokens = 0
    last = -1.0
    for r in read_trace(path):
        n += 1
        tokens += r.input_tokens
        assert r.arrival_s >= last
        last = r.arrival_s
    assert n == 1_000_000
    assert tokens == sum(100 + i * 7919 % 8000 for i in range(1_000_000))
    assert last == pytest.approx(999_999 * 0.001234, abs=1e-6)
    assert _rss_peak_bytes() - before < 200 * 2**20
