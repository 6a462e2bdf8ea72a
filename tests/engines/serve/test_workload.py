"""Seeded request streams (statistics checked on fixed seeds), JSONL traces and their errors."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from inferlab.engines.serve.workload import (
    MAX_TRACE_BYTES,
    MAX_TRACE_LINES,
    LengthDist,
    Workload,
    WorkloadError,
    WorkloadRequest,
    generate,
    prompt_texts,
    read_trace,
    write_trace,
)
from tests.engines.serve.trace_fuzz import fuzz_traces
from tests.fuzz import mutate_json_bytes

SEED = 20261201


def gaps(requests) -> np.ndarray:
    return np.diff([r.arrival_s for r in requests])


# ---- generate -----------------------------------------------------------------------------

def test_same_seed_same_stream_different_seed_different():
    spec = Workload(200, rate_per_s=5.0, prompt_len=LengthDist.uniform(10, 500),
                    output_len=LengthDist.lognormal(4.0, 1.0), seed=1)
    assert generate(spec) == generate(spec)
    other = generate(Workload(200, rate_per_s=5.0, prompt_len=LengthDist.uniform(10, 500),
                              output_len=LengthDist.lognormal(4.0, 1.0), seed=2))
    assert other != generate(spec)
    assert [r.arrival_s for r in other] != [r.arrival_s for r in generate(spec)]


def test_arrivals_do_not_depend_on_the_length_distributions():
    a = generate(Workload(50, rate_per_s=2.0, seed=3))
    b = generate(Workload(50, rate_per_s=2.0, prompt_len=LengthDist.lognormal(6, 1), seed=3))
    assert [r.arrival_s for r in a] == [r.arrival_s for r in b]


def test_all_at_zero_and_fixed_lengths():
    reqs = generate(Workload(30, arrival="all-at-zero", rate_per_s=0.0,
                             prompt_len=LengthDist.fixed(512), output_len=LengthDist.fixed(7)))
    assert len(reqs) == 30
    assert all(r.arrival_s == 0.0 for r in reqs)
    assert all((r.prompt_tokens, r.output_tokens) == (512, 7) for r in reqs)
    assert all(r.prefix_id is None and r.prompt == "" for r in reqs)
    assert all(type(r.prompt_tokens) is int and type(r.arrival_s) is float for r in reqs)


def test_poisson_mean_gap_is_one_over_rate():
    reqs = generate(Workload(20_001, rate_per_s=8.0, seed=SEED))
    g = gaps(reqs)
    assert reqs[0].arrival_s == 0.0 and len(g) == 20_000 and (g >= 0).all()
    assert g.mean() == pytest.approx(1 / 8.0, rel=0.03)
    assert g.std() / g.mean() == pytest.approx(1.0, rel=0.05)  # exponential: CV = 1


def test_gamma_burstiness():
    poisson = gaps(generate(Workload(20_001, "poisson", 4.0, seed=SEED)))
    gamma1 = gaps(generate(Workload(20_001, "gamma", 4.0, burstiness=1.0, seed=SEED + 1)))
    bursty = gaps(generate(Workload(20_001, "gamma", 4.0, burstiness=0.25, seed=SEED + 2)))
    steady = gaps(generate(Workload(20_001, "gamma", 4.0, burstiness=4.0, seed=SEED + 3)))
    # Every stream keeps the mean gap 1/rate.
    for g in (poisson, gamma1, bursty, steady):
        assert g.mean() == pytest.approx(0.25, rel=0.03)
    cv = {name: g.std() / g.mean() for name, g in
          (("poisson", poisson), ("gamma1", gamma1), ("bursty", bursty), ("steady", steady))}
    # Gamma(shape b): CV = 1/sqrt(b).
    assert cv["gamma1"] == pytest.approx(cv["poisson"], rel=0.05)
    assert cv["bursty"] == pytest.approx(2.0, rel=0.08)
    assert cv["steady"] == pytest.approx(0.5, rel=0.05)
    assert cv["bursty"] > cv["gamma1"] > cv["steady"]


def test_lognormal_median_and_clipping():
    reqs = generate(Workload(20_000, prompt_len=LengthDist.lognormal(5.0, 0.6),
                             output_len=LengthDist.lognormal(-3.0, 1.0), seed=SEED))
    prompts = np.array([r.prompt_tokens for r in reqs])
    assert np.median(prompts) == pytest.approx(math.exp(5.0), rel=0.03)
    outputs = np.array([r.output_tokens for r in reqs])
    assert outputs.min() == 1 and (outputs == 1).mean() > 0.9  # exp(-3) rounds to 0: clipped


def test_uniform_lengths_span_low_to_high_inclusive():
    reqs = generate(Workload(5000, prompt_len=LengthDist.uniform(3, 6), seed=SEED))
    assert sorted({r.prompt_tokens for r in reqs}) == [3, 4, 5, 6]


def test_shared_prefix_requests_name_their_prefix():
    spec = Workload(600, rate_per_s=10.0, prompt_len=LengthDist.fixed(40),
                    shared_prefix_tokens=1000, n_prefixes=3, seed=SEED)
    reqs = generate(spec)
    assert {r.prefix_id for r in reqs} == {0, 1, 2}
    assert all(r.prompt_tokens == 1040 for r in reqs)
    by_prefix = {p: [r for r in reqs if r.prefix_id == p] for p in range(3)}
    assert all(len(group) > 150 for group in by_prefix.values())


@pytest.mark.parametrize("kwargs, field", [
    ({"n_requests": 0}, "n_requests"),
    ({"n_requests": -3}, "n_requests"),
    ({"n_requests": 2.5}, "n_requests"),
    ({"n_requests": True}, "n_requests"),
    ({"n_requests": 10, "rate_per_s": 0.0}, "rate_per_s"),
    ({"n_requests": 10, "rate_per_s": -1.0}, "rate_per_s"),
    ({"n_requests": 10, "rate_per_s": math.nan}, "rate_per_s"),
    ({"n_requests": 10, "arrival": "gamma", "burstiness": 0.0}, "burstiness"),
    ({"n_requests": 10, "burstiness": math.nan}, "burstiness"),
    ({"n_requests": 10, "arrival": "uniform"}, "arrival"),
    ({"n_requests": 10, "prompt_len": LengthDist.fixed(0)}, "prompt_len.value"),
    ({"n_requests": 10, "output_len": LengthDist.uniform(9, 3)}, "output_len.low"),
    ({"n_requests": 10, "output_len": LengthDist.uniform(0, 3)}, "output_len.low"),
    ({"n_requests": 10, "prompt_len": LengthDist.lognormal(4.0, -0.1)}, "prompt_len.sigma"),
    ({"n_requests": 10, "prompt_len": LengthDist.lognormal(math.nan, 1.0)}, "prompt_len.mean"),
    ({"n_requests": 10, "prompt_len": LengthDist("zipf")}, "prompt_len.kind"),
    ({"n_requests": 10, "shared_prefix_tokens": -1}, "shared_prefix_tokens"),
    ({"n_requests": 10, "n_prefixes": 0}, "n_prefixes"),
    ({"n_requests": 10, "seed": -1}, "seed"),
])
def test_bad_specs_name_the_field(kwargs, field):
    with pytest.raises(WorkloadError, match=f"'{field}'"):
        Workload(**kwargs)


def test_a_rate_too_small_to_add_up_is_refused():
    with pytest.raises(WorkloadError, match="rate_per_s"):
        generate(Workload(3, rate_per_s=1e-320, seed=1))


def test_prompt_texts_are_shipped():
    texts = prompt_texts()
    assert len(texts) >= 40 and len(set(texts)) == len(texts)
    assert all(0 < len(t) < 200 for t in texts)


# ---- traces ------------------------------------------------------------------------------

def test_trace_round_trip(tmp_path):
    reqs = generate(Workload(300, "gamma", 3.0, burstiness=0.5,
                             prompt_len=LengthDist.lognormal(6, 1), shared_prefix_tokens=64,
                             n_prefixes=4, seed=SEED))
    texts = prompt_texts()
    reqs = [WorkloadRequest(r.arrival_s, r.prompt_tokens, r.output_tokens,
                            prompt=texts[i % len(texts)] if i % 3 else "", prefix_id=r.prefix_id)
            for i, r in enumerate(reqs)]
    reqs.append(WorkloadRequest(reqs[-1].arrival_s + 0.1, 5, 6, prompt="naïve 日本語\n\"q\""))
    path = tmp_path / "trace.jsonl"
    write_trace(path, reqs)
    assert read_trace(path) == reqs
    write_trace(path, [])
    assert read_trace(path) == []


def test_trace_arrivals_are_sorted_stably_and_blank_lines_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('\n{"arrival_s": 2, "prompt_tokens": 1, "output_tokens": 1}\n'
                    '   \n'
                    '{"arrival_s": 1.0, "prompt_tokens": 2, "output_tokens": 1, "extra": [1]}\n'
                    '{"arrival_s": 2.0, "prompt_tokens": 3, "output_tokens": 1}\r\n\n')
    reqs = read_trace(path)
    assert [(r.arrival_s, r.prompt_tokens) for r in reqs] == [(1.0, 2), (2.0, 1), (2.0, 3)]


GOOD = '{"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 4}'


@pytest.mark.parametrize("line, message", [
    ('{"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": -2}',
     "trace.jsonl line 3: field 'output_tokens' must be an integer ≥ 1, got -2"),
    ('{"arrival_s": 0.5, "prompt_tokens": 0, "output_tokens": 4}',
     "trace.jsonl line 3: field 'prompt_tokens' must be an integer ≥ 1, got 0"),
    ('{"arrival_s": 0.5, "prompt_tokens": 10.0, "output_tokens": 4}',
     "line 3: field 'prompt_tokens' must be an integer ≥ 1, got 10.0"),
    ('{"arrival_s": 0.5, "prompt_tokens": "10", "output_tokens": 4}',
     "line 3: field 'prompt_tokens' must be an integer ≥ 1, got '10'"),
    ('{"arrival_s": 0.5, "prompt_tokens": true, "output_tokens": 4}',
     "line 3: field 'prompt_tokens' must be an integer ≥ 1, got True"),
    ('{"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 100000000000}',
     "line 3: field 'output_tokens' must be at most 10,000,000"),
    ('{"arrival_s": 0.5, "prompt_tokens": 10}', "line 3: missing field 'output_tokens'"),
    ('{"prompt_tokens": 10, "output_tokens": 4}', "line 3: missing field 'arrival_s'"),
    ('{"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 4',
     "trace.jsonl line 3: not valid JSON"),
    ('[0.5, 10, 4]', "line 3: expected a JSON object, got list"),
    ('{"arrival_s": NaN, "prompt_tokens": 10, "output_tokens": 4}',
     "line 3: not valid JSON (NaN is not a number JSON allows)"),
    ('{"arrival_s": Infinity, "prompt_tokens": 10, "output_tokens": 4}', "line 3: not valid JSON"),
    ('{"arrival_s": 1e999, "prompt_tokens": 10, "output_tokens": 4}',
     "line 3: field 'arrival_s' must be a finite number, got inf"),
    ('{"arrival_s": -0.5, "prompt_tokens": 10, "output_tokens": 4}',
     "line 3: field 'arrival_s' must be ≥ 0, got -0.5"),
    ('{"arrival_s": "0.5", "prompt_tokens": 10, "output_tokens": 4}',
     "line 3: field 'arrival_s' must be a finite number"),
    ('{"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 4, "prompt": 7}',
     "line 3: field 'prompt' must be a string, got 7"),
    ('{"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 4, "prompt": "\\ud800"}',
     "line 3: field 'prompt' is not valid Unicode text"),
    ('{"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 4, "prefix_id": -1}',
     "line 3: field 'prefix_id' must be an integer ≥ 0, got -1"),
    ('{"arrival_s": 0.5, "prompt_tokens": ' + "1" * 5000 + ', "output_tokens": 4}',
     "line 3: not valid JSON"),
    ('{"arrival_s": ' + "[" * 100_000 + "]" * 100_000 + "}", "line 3: "),
])
def test_bad_trace_lines_name_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "trace.jsonl"
    path.write_text(f"{GOOD}\n\n{line}\n{GOOD}\n")
    with pytest.raises(WorkloadError) as err:
        read_trace(path)
    assert message in str(err.value)


def test_bad_utf8_names_the_line(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + b'{"arrival_s": 1, "prompt": "\xff"}\n')
    with pytest.raises(WorkloadError, match="trace.jsonl line 2: not UTF-8"):
        read_trace(path)


def test_missing_file_is_a_workload_error(tmp_path):
    with pytest.raises(WorkloadError, match="nope.jsonl: cannot read"):
        read_trace(tmp_path / "nope.jsonl")


def test_oversized_trace_is_refused_with_the_numbers(tmp_path):
    path = tmp_path / "big.jsonl"
    with open(path, "wb") as f:  # sparse: takes no disk
        f.truncate(MAX_TRACE_BYTES + 1)
    with pytest.raises(WorkloadError, match="big.jsonl: 67,108,865 bytes, over the "
                                            "67,108,864-byte limit"):
        read_trace(path)


def test_too_many_lines_is_refused_with_the_numbers(tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"\n" * (MAX_TRACE_LINES + 1))
    with pytest.raises(WorkloadError, match="long.jsonl: 1,000,001 lines, over the "
                                            "1,000,000-line limit"):
        read_trace(path)
    path.write_bytes(b"\n" * MAX_TRACE_LINES)
    assert read_trace(path) == []


# ---- fuzz -------------------------------------------------------------------------------

N_FUZZ_CASES = 2500


def _good_trace() -> list[dict]:
    return [{"arrival_s": 0.0, "prompt_tokens": 12, "output_tokens": 3, "prompt": "Hi there"},
            {"arrival_s": 0.25, "prompt_tokens": 900, "output_tokens": 128, "prefix_id": 1},
            {"arrival_s": 0.125, "prompt_tokens": 1, "output_tokens": 1},
            {"arrival_s": 3, "prompt_tokens": 40, "output_tokens": 16, "prompt": "",
             "prefix_id": 0}]


def _fuzz_file(rng: random.Random) -> tuple[str, bytes]:
    """A good trace with one line mutated (or the file's bytes flipped, cut, or blanks added)."""
    lines = [json.dumps(obj).encode() for obj in _good_trace()]
    r = rng.random()
    if r < 0.8:
        i = rng.randrange(len(lines))
        label, lines[i] = mutate_json_bytes(_good_trace()[i], rng)
        label = f"line {i + 1}: {label}"
        data = b"\n".join(lines) + b"\n"
    else:
        data = b"\n".join(lines) + b"\n"
        if r < 0.9:
            i = rng.randrange(len(data))
            b = rng.choice((b"\n", b"\r", b" ", b"\x00", b"\xff", b"\xed\xa0\x80", b"{"))
            label, data = f"insert {b!r} at {i}", data[:i] + b + data[i:]
        else:
            n = rng.randrange(len(data))
            label, data = f"cut at {n}", data[:n]
    return label, data


def test_fuzz_mutated_traces_end_in_workload_error_or_a_clean_list(tmp_path):
    result = fuzz_traces(tmp_path, random.Random(SEED), _fuzz_file, N_FUZZ_CASES)
    assert result.ok > 100 and result.refused > 1000, result.summary()
