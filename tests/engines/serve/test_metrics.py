"""Serving metrics against hand-worked values, vLLM's edge cases, and properties."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.serve.metrics import (
    SLO,
    RequestTiming,
    cost_per_million_output_tokens,
    e2e_s,
    itl_s,
    percentiles,
    summarize,
    tpot_s,
    ttft_s,
)

approx = pytest.approx

# Four requests on one clock (seconds). Worked by hand:
#   R0 arrives 0, tokens 1 2 4      TTFT 1    E2E 4    TPOT (4-1)/2 = 1.5   ITL 1 2
#   R1 arrives 1, tokens 3 4 5 6 7  TTFT 2    E2E 6    TPOT (6-2)/4 = 1.0   ITL 1 1 1 1
#   R2 arrives 2, tokens 2.5 5.5    TTFT 0.5  E2E 3.5  TPOT 3/1 = 3.0       ITL 3
#   R3 arrives 3, token 8           TTFT 5    E2E 5    no TPOT (one token)  no ITL
SCHEDULE = (
    RequestTiming(0.0, (1.0, 2.0, 4.0), prompt_tokens=10),
    RequestTiming(1.0, (3.0, 4.0, 5.0, 6.0, 7.0), prompt_tokens=20),
    RequestTiming(2.0, (2.5, 5.5), prompt_tokens=30),
    RequestTiming(3.0, (8.0,), prompt_tokens=40),
)


def test_per_request_formulas():
    assert [ttft_s(t) for t in SCHEDULE] == [1.0, 2.0, 0.5, 5.0]
    assert [e2e_s(t) for t in SCHEDULE] == [4.0, 6.0, 3.5, 5.0]
    assert [tpot_s(t) for t in SCHEDULE] == [1.5, 1.0, 3.0, None]
    assert itl_s(SCHEDULE) == [1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 3.0]


def test_hand_worked_summary():
    m = summarize(SCHEDULE)
    assert (m.completed, m.failed) == (4, 0)
    assert (m.total_input_tokens, m.total_output_tokens) == (100, 11)
    assert m.duration_s == 8.0  # last token 8 - first arrival 0
    assert m.request_throughput == 0.5
    assert m.output_tokens_per_s == 11 / 8
    assert m.total_tokens_per_s == 111 / 8

    # TTFT sorted 0.5 1 2 5 (m=4): rank r = p/100 * 3
    #   p50: r=1.5  -> 1 + 0.5*(2-1) = 1.5
    #   p90: r=2.7  -> 2 + 0.7*(5-2) = 4.1
    #   p99: r=2.97 -> 2 + 0.97*3    = 4.91
    #   mean 8.5/4 = 2.125; std sqrt((1.625² + 1.125² + 0.125² + 2.875²)/4) = sqrt(3.046875)
    assert m.ttft_s.count == 4
    assert m.ttft_s.mean == approx(2.125)
    assert (m.ttft_s.p50, m.ttft_s.p90, m.ttft_s.p99) == approx((1.5, 4.1, 4.91))
    assert m.ttft_s.median == m.ttft_s.p50
    assert m.ttft_s.std == approx(math.sqrt(3.046875))

    # TPOT sorted 1 1.5 3 (m=3, R3 left out): r = p/100 * 2
    #   p50: r=1 -> 1.5;  p90: r=1.8 -> 1.5 + 0.8*1.5 = 2.7;  p99: r=1.98 -> 1.5 + 0.98*1.5 = 2.97
    assert m.tpot_s.count == 3
    assert m.tpot_s.mean == approx(5.5 / 3)
    assert (m.tpot_s.p50, m.tpot_s.p90, m.tpot_s.p99) == approx((1.5, 2.7, 2.97))

    # ITL pooled, sorted 1 1 1 1 1 2 3 (7 = 2+4+1+0 gaps): r = p/100 * 6
    #   p50: r=3 -> 1;  p90: r=5.4 -> 2 + 0.4*1 = 2.4;  p99: r=5.94 -> 2 + 0.94 = 2.94
    assert m.itl_s.count == 7
    assert m.itl_s.mean == approx(10 / 7)
    assert (m.itl_s.p50, m.itl_s.p90, m.itl_s.p99) == approx((1.0, 2.4, 2.94))

    # E2E sorted 3.5 4 5 6: p50 r=1.5 -> 4.5; p90 r=2.7 -> 5 + 0.7 = 5.7; p99 r=2.97 -> 5.97
    assert m.e2e_s.mean == approx(18.5 / 4)
    assert (m.e2e_s.p50, m.e2e_s.p90, m.e2e_s.p99) == approx((4.5, 5.7, 5.97))
    assert m.goodput_requests_per_s is None


def test_goodput_one_request_fails_the_slo():
    # TPOT <= 2 and E2E <= 6: R0 passes; R1 passes (E2E 6: the limit is inclusive); R2 fails
    # (TPOT 3); R3 has one token, so no TPOT, and passes (E2E 5). 3 good requests / 8 s.
    m = summarize(SCHEDULE, slo=SLO(tpot_s=2.0, e2e_s=6.0))
    assert m.goodput_requests_per_s == 3 / 8
    # A TTFT objective of 1 s leaves R0 and R2.
    assert summarize(SCHEDULE, slo=SLO(ttft_s=1.0)).goodput_requests_per_s == 2 / 8
    # No objective given in the SLO: every completed request counts.
    assert summarize(SCHEDULE, slo=SLO()).goodput_requests_per_s == 4 / 8


def test_to_dict_has_unit_suffixed_keys_and_is_json():
    d = summarize(SCHEDULE, duration_s=10.0, slo=SLO(ttft_s=2.0)).to_dict()
    assert d["duration_s"] == 10.0
    assert d["output_tokens_per_s"] == 1.1
    assert d["request_throughput_per_s"] == 0.4
    assert set(d["ttft_s"]) == {"mean", "p50", "p90", "p99", "std"}
    assert d["tpot_s"]["p50"] == 1.5
    assert d["goodput_requests_per_s"] == 3 / 10
    json.dumps(d, allow_nan=False)


def test_single_token_requests_have_no_tpot_or_itl():
    timings = [RequestTiming(0.0, (0.25,), 5), RequestTiming(0.5, (1.0,), 7)]
    m = summarize(timings)
    assert m.tpot_s.count == 0 and m.tpot_s.mean is None and m.tpot_s.p99 is None
    assert m.itl_s.count == 0 and m.itl_s.p50 is None
    assert m.ttft_s.mean == approx(0.375)
    assert m.total_output_tokens == 2
    assert summarize(timings, slo=SLO(tpot_s=0.001)).goodput_requests_per_s == 2 / 1.0


def test_failed_requests_count_only_as_failed():
    timings = [*SCHEDULE[:2],
               RequestTiming(2.0, (2.1,), 50, ok=False, error="HTTP 500"),
               RequestTiming(2.5, (), 60, ok=False, error="timeout")]
    m = summarize(timings)
    assert (m.completed, m.failed) == (2, 2)
    assert (m.total_input_tokens, m.total_output_tokens) == (30, 8)
    assert m.ttft_s.count == 2 and m.ttft_s.mean == approx(1.5)
    assert m.itl_s.count == 6


@pytest.mark.parametrize("timings", [
    [],
    [RequestTiming(0.0, (), 10, ok=False, error="refused")],
    [RequestTiming(1.0, (1.5, 2.0), 3, ok=False), RequestTiming(0.0, (), 4, ok=False)],
])
def test_empty_and_all_failed_give_zeros_and_nones(timings):
    m = summarize(timings, slo=SLO(ttft_s=1.0))
    assert m.completed == 0 and m.failed == len(timings)
    assert m.request_throughput == m.output_tokens_per_s == m.total_tokens_per_s == 0.0
    assert m.goodput_requests_per_s == 0.0
    for dist in (m.ttft_s, m.tpot_s, m.itl_s, m.e2e_s):
        assert dist.count == 0 and dist.to_dict() == dict.fromkeys(dist.to_dict())
    json.dumps(m.to_dict(), allow_nan=False)


def test_completed_request_without_tokens_has_no_latency():
    m = summarize([RequestTiming(0.0, (), 9)], slo=SLO(ttft_s=1.0))
    assert m.completed == 1 and m.total_input_tokens == 9
    assert m.ttft_s.count == 0 and m.duration_s == 0.0 and m.request_throughput == 0.0
    assert m.goodput_requests_per_s == 0.0


def test_bad_inputs_are_refused_by_name():
    with pytest.raises(ValueError, match="token_times_s"):
        RequestTiming(0.0, (2.0, 1.0), 1)
    with pytest.raises(ValueError, match="precedes arrival_s"):
        RequestTiming(1.0, (0.5,), 1)
    with pytest.raises(ValueError, match="arrival_s"):
        RequestTiming(math.nan, (), 1)
    with pytest.raises(ValueError, match="prompt_tokens"):
        RequestTiming(0.0, (), -1)
    with pytest.raises(ValueError, match="tpot_s"):
        SLO(tpot_s=0.0)
    with pytest.raises(ValueError, match="duration_s"):
        summarize(SCHEDULE, duration_s=math.inf)


def test_cost_per_million_output_tokens():
    # $2/h at 1000 tok/s: 2 / 3600 / 1000 * 1e6 = $0.5556 per million
    assert cost_per_million_output_tokens(2.0, 1000.0) == approx(2 / 3.6)
    assert cost_per_million_output_tokens(3.6, 1.0) == approx(1000.0)
    assert cost_per_million_output_tokens(2.0, 0.0) is None
    with pytest.raises(ValueError, match="dollars_per_hour"):
        cost_per_million_output_tokens(-1.0, 10.0)


def test_percentiles_match_numpy_on_random_data():
    rng = np.random.default_rng(7)
    for size in (1, 2, 3, 10, 101, 1000):
        values = rng.lognormal(0.0, 1.0, size)
        ps = (0, 1, 25, 50, 90, 99, 99.9, 100)
        assert percentiles(values, ps) == approx(tuple(np.percentile(values, ps)), rel=1e-12)
    assert percentiles([]) == (None, None, None)


@st.composite
def timing_lists(draw):
    out = []
    for _ in range(draw(st.integers(0, 8))):
        arrival = draw(st.floats(0, 100, allow_nan=False))
        first = arrival + draw(st.floats(0, 10, allow_nan=False))
        gaps = draw(st.lists(st.floats(0, 5, allow_nan=False), max_size=12))
        times = [first]
        for g in gaps:
            times.append(times[-1] + g)
        n_out = draw(st.integers(0, len(times)))
        out.append(RequestTiming(arrival, tuple(times[:n_out]), draw(st.integers(0, 50)),
                                 ok=draw(st.booleans())))
    return out


@settings(max_examples=200, deadline=None, derandomize=True)
@given(timing_lists())
def test_properties(timings):
    m = summarize(timings)
    done = [t for t in timings if t.ok]
    assert m.itl_s.count == sum(max(0, t.output_tokens - 1) for t in done)
    per_request = [(e2e_s(t) - ttft_s(t)) / (t.output_tokens - 1)
                   for t in done if t.output_tokens >= 2]
    if per_request:
        assert m.tpot_s.mean == approx(float(np.mean(per_request)), rel=1e-9, abs=1e-12)
    else:
        assert m.tpot_s.mean is None
    for dist, values in ((m.ttft_s, [ttft_s(t) for t in done if t.output_tokens]),
                         (m.itl_s, itl_s(done))):
        if values:
            tol = 1e-9 * max(1.0, max(values))
            assert dist.p50 <= dist.p90 + tol and dist.p90 <= dist.p99 + tol
            assert dist.p99 <= max(values) + tol
    json.dumps(m.to_dict(), allow_nan=False)
