"""Load against the fake server over real sockets: concurrency, arrival times, bounds,
cancel, length controls, the chat API, token counting; metrics from engines.serve."""

from __future__ import annotations

import time

import pytest

from inferlab.engines.endpoint.load import EndpointRun
from inferlab.engines.serve.metrics import SLO, summarize
from inferlab.engines.serve.workload import LengthDist, Workload, generate

from .conftest import quick_settings, requests


def test_fifty_concurrent_streams_complete_with_the_right_chunks(fake_server):
    server = fake_server(token_interval_s=0.01)
    work = generate(Workload(n_requests=100, output_len=LengthDist.uniform(5, 30), seed=3))
    result = EndpointRun(quick_settings(server.url, concurrency=50), work,
                         slo=SLO(ttft_s=5.0)).run()
    assert server.peak_running == 50
    assert [r.index for r in result.results] == list(range(100))
    for r, req in zip(result.results, work, strict=True):
        assert r.ok, r.error
        assert len(r.chunk_times_s) == r.output_tokens == req.output_tokens
        assert r.token_source == "usage" and r.finish_reason == "length"
        assert r.send_s < r.chunk_times_s[0] < r.chunk_times_s[-1] <= r.end_s
        assert 0 < r.ttft_s < r.e2e_s
        assert r.text == "".join(f"t{i} " for i in range(req.output_tokens))
    m = result.metrics
    assert (m.completed, m.failed, m.total_output_tokens) == (
        100, 0, sum(r.output_tokens for r in work))
    assert m.tpot_s.p50 >= 0.009  # the server sleeps 10 ms between tokens
    assert m.goodput_requests_per_s == pytest.approx(m.request_throughput)
    assert m == summarize([r.to_timing() for r in result.results], m.duration_s, SLO(ttft_s=5.0))
    assert result.notes == ()  # vLLM kind: ignore_eos and min_tokens sent, usage given


def test_arrival_times_are_followed_and_the_cap_is_reported(fake_server):
    server = fake_server(token_interval_s=0.02)
    work = generate(Workload(n_requests=12, arrival="poisson", rate_per_s=40,
                             output_len=LengthDist.fixed(4), seed=1))
    result = EndpointRun(quick_settings(server.url, concurrency=None), work).run()
    t0 = result.results[0].scheduled_s
    for r, req in zip(result.results, work, strict=True):
        assert r.ok
        assert r.scheduled_s - t0 == pytest.approx(req.arrival_s, abs=1e-9)
        assert r.send_s - r.scheduled_s >= -0.001  # never early (lateness: the notes)
    capped = EndpointRun(quick_settings(server.url, concurrency=None, max_in_flight=2),
                         requests(8, output_tokens=10)).run()
    assert server.peak_running <= 12 and capped.metrics.completed == 8
    assert any("requests went out more than 50 ms late" in n and "in-flight cap (2)" in n
               for n in capped.notes)


def test_max_requests_and_max_duration_bound_the_run(fake_server):
    server = fake_server(token_interval_s=0.05)
    capped = EndpointRun(quick_settings(server.url, concurrency=4, max_requests=3),
                         requests(50, output_tokens=2)).run()
    assert len(capped.results) == 3 and capped.metrics.completed == 3
    result = EndpointRun(quick_settings(server.url, concurrency=4, max_duration_s=0.4),
                         requests(50, output_tokens=100)).run()
    assert result.stopped == "max duration"
    assert result.incomplete == 4 and result.metrics.failed == 0
    assert result.not_sent == 46
    assert {r.error_kind for r in result.results} == {"cancelled"}


def test_cancel_closes_every_connection_promptly(fake_server):
    server = fake_server()
    run = EndpointRun(quick_settings(server.url, concurrency=None, read_timeout_s=30),
                      requests(40, prompt="[fake:stall]"))
    run.start()
    deadline = time.perf_counter() + 30  # a hang guard, not a speed bound (a shared machine)
    while server.requests < 41 and time.perf_counter() < deadline:  # the probe, then 40
        time.sleep(0.01)
    assert server.requests == 41 and server.open_connections >= 40
    run.cancel()
    result = run.wait(30)  # a hang guard, not a speed bound
    assert result is not None
    assert result.stopped == "cancelled" and result.incomplete == 40
    assert result.results[0].error == "cancelled after 0 chunks"
    closing = time.perf_counter() + 30  # a hang guard: the server sees the closes shortly
    while server.open_connections and time.perf_counter() < closing:
        time.sleep(0.01)
    assert server.open_connections == 0


@pytest.mark.parametrize("kind, sent, noted", [
    ("vllm", {"ignore_eos", "min_tokens"}, False),
    ("llama-cpp-python", {"min_tokens"}, True),
    ("openai", set(), True),
])
def test_length_controls_per_server_kind(fake_server, kind, sent, noted):
    server = fake_server(eos_after=3)
    result = EndpointRun(quick_settings(server.url, concurrency=2, server_kind=kind),
                         requests(2, output_tokens=6)).run()
    body = server.bodies[-1]
    assert {k for k in ("ignore_eos", "min_tokens") if k in body} == sent
    assert any(f"server kind {kind!r} is sent" in n for n in result.notes) == noted
    shortened = not sent  # the fake server stops at EOS unless told otherwise
    assert [r.output_tokens for r in result.results] == [3 if shortened else 6] * 2
    assert any("2 of 2 completed requests returned fewer tokens" in n
               for n in result.notes) == shortened


def test_chat_streams_time_token_chunks_only(fake_server):
    server = fake_server()
    result = EndpointRun(quick_settings(server.url, api="chat", concurrency=3),
                         requests(3, output_tokens=5)).run()
    assert all(r.ok and len(r.chunk_times_s) == 5 == r.output_tokens for r in result.results)
    assert server.bodies[-1]["messages"][0]["role"] == "user"


def test_tokens_counted_without_usage(fake_server):
    server = fake_server(usage=False)
    by_chunks = EndpointRun(quick_settings(server.url, concurrency=2), requests(2, 7)).run()
    assert [(r.token_source, r.output_tokens) for r in by_chunks.results] == [("chunks", 7)] * 2
    assert "the server gave no usage: output tokens counted as chunks" in by_chunks.notes

    def two_per_word(text: str) -> list[int]:
        return [0, 0] * len(text.split())

    by_tokenizer = EndpointRun(quick_settings(server.url, concurrency=2), requests(2, 7),
                               count_tokens=two_per_word).run()
    r = by_tokenizer.results[0]
    assert (r.token_source, r.output_tokens, r.chunk_tokens) == ("tokenizer", 14, (2,) * 7)
    assert r.to_timing().output_tokens == 14
