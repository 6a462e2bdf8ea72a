"""engines.serve.metrics with chunked streams: RequestTiming.token_count (n_out) beside one
time per chunk, as `vllm bench serve` scores a server that sends several tokens a chunk."""

from __future__ import annotations

import pytest

from inferlab.engines.endpoint.client import StreamResult
from inferlab.engines.serve.metrics import RequestTiming, itl_s, summarize, tpot_s


def test_token_count_sets_n_out_and_itl_stays_per_chunk():
    t = RequestTiming(arrival_s=0.0, token_times_s=(0.5, 0.7, 1.1), prompt_tokens=4,
                      token_count=9)
    assert t.output_tokens == 9
    assert tpot_s(t) == pytest.approx((1.1 - 0.5) / 8)
    assert itl_s([t]) == pytest.approx([0.2, 0.4])
    m = summarize([t])
    assert m.total_output_tokens == 9 and m.output_tokens_per_s == pytest.approx(9 / 1.1)
    plain = RequestTiming(arrival_s=0.0, token_times_s=(0.5, 0.7, 1.1), prompt_tokens=4)
    assert plain.output_tokens == 3 and tpot_s(plain) == pytest.approx(0.3)


@pytest.mark.parametrize("bad", [-1, 2.0, True, "3"])
def test_token_count_is_checked(bad):
    with pytest.raises(ValueError, match="token_count"):
        RequestTiming(arrival_s=0.0, token_times_s=(), prompt_tokens=0, token_count=bad)


def test_a_failed_stream_is_a_failed_timing():
    r = StreamResult(index=0, scheduled_s=0.0, send_s=0.1, end_s=0.4, chunk_times_s=(0.2,),
                     chunk_tokens=(1,), output_tokens=1, token_source="chunks",
                     prompt_tokens=3, requested_tokens=8,
                     error="connection reset mid-stream after 1 chunks", error_kind="reset")
    t = r.to_timing()
    assert (t.ok, t.error, t.arrival_s, t.output_tokens) == (
        False, "connection reset mid-stream after 1 chunks", 0.1, 1)
    m = summarize([t])
    assert (m.completed, m.failed) == (0, 1)
