"""One request at a time, FCFS, llama.cpp's one-sequence prefix reuse: a 3-request example
worked by hand, exact; reuse off; arrival order, not list order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.serve.fitted_cost import FittedCost
from inferlab.engines.serve.serial_queue import SerialRequest, simulate_serial

# prefill_s(n) = 0.1 + 0.01·n;  decode_s(ctx) = 0.02 + 0.0001·ctx
COST = FittedCost((0.1, 0.01), (0.02, 0.0001))
R0 = SerialRequest(0.0, tuple(range(1, 11)), 3)                  # 10 tokens
R1 = SerialRequest(0.1, tuple(range(1, 7)) + (50, 51, 52, 53), 2)  # shares 6 with R0
R2 = SerialRequest(1.0, R1.prompt, 1)                             # R1's prompt again


def test_three_requests_by_hand():
    t0, t1, t2 = simulate_serial([R0, R1, R2], COST)
    # R0: idle server; prefill 0.1 + 0.10; decodes at ctx 11, 12: 0.0211 + 0.0212
    assert (t0.start_s, t0.reused_tokens) == (0.0, 0)
    assert (t0.ttft_s, t0.e2e_s) == pytest.approx((0.2, 0.2423), abs=1e-12)
    # R1 waits for R0 (0.2423); 6 tokens reused, 4 computed: 0.14; one decode at ctx 11
    assert (t1.start_s, t1.reused_tokens) == (pytest.approx(0.2423), 6)
    assert t1.first_token_s == pytest.approx(0.3823, abs=1e-12)
    assert (t1.ttft_s, t1.e2e_s) == pytest.approx((0.2823, 0.3034), abs=1e-12)
    # R2 arrives on an idle server with R1's prompt: all but the last token reused
    assert (t2.start_s, t2.reused_tokens) == (1.0, 9)
    assert (t2.ttft_s, t2.e2e_s) == pytest.approx((0.11, 0.11), abs=1e-12)


def test_without_reuse_every_prompt_is_computed_whole():
    t0, t1, t2 = simulate_serial([R0, R1, R2], COST, prefix_reuse=False)
    assert [t.reused_tokens for t in (t0, t1, t2)] == [0, 0, 0]
    assert t1.first_token_s == pytest.approx(0.2423 + 0.2, abs=1e-12)
    assert t2.ttft_s == pytest.approx(0.2, abs=1e-12)


def test_the_queue_is_in_arrival_order_whatever_the_list_order():
    assert simulate_serial([R2, R0, R1], COST) == [simulate_serial([R0, R1, R2], COST)[i]
                                                   for i in (2, 0, 1)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 5), st.integers(1, 30), st.integers(1, 8)),
                min_size=1, max_size=12))
def test_one_at_a_time(rows):
    """No two requests overlap, none starts before it arrives, and each takes at least its
    prompt's unreused part and its decodes."""
    reqs = [SerialRequest(a, tuple(range(n)), m) for a, n, m in rows]
    times = sorted(simulate_serial(reqs, COST), key=lambda t: t.start_s)
    for before, after in zip(times, times[1:], strict=False):
        assert after.start_s >= before.end_s
    for t in times:
        assert t.start_s >= t.arrival_s and t.ttft_s >= 0.1 and t.e2e_s >= t.ttft_s


def test_a_request_without_output_is_refused():
    with pytest.raises(ValueError, match="request 0"):
        simulate_serial([SerialRequest(0.0, (1,), 0)], COST)
