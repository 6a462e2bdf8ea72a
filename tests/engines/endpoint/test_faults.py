"""A misbehaving server: every fault is a counted, named failure, the run goes on, and nothing
hangs (short timeouts; the whole file takes a few seconds)."""

from __future__ import annotations

from collections import Counter

from inferlab.engines.endpoint.load import EndpointRun
from inferlab.engines.serve.workload import WorkloadRequest

from .conftest import quick_settings, requests

FAULTS = {
    "stall": ("timeout", "timeout after 0.5 s waiting for the first byte"),
    "stallmid": ("timeout", "timeout after 0.5 s with no data after 2 chunks"),
    "reset": ("reset", "connection reset mid-stream after 3 chunks"),
    "http500": ("http", "HTTP 500: Internal Server Error: the fake engine died"),
    "http500deep": ("http", 'HTTP 500: {"error": [[[['),
    "garbage": ("malformed", "malformed SSE: line 'this is not an event stream' is not an "
                             "SSE field"),
    "nonutf8": ("malformed", "malformed SSE: not UTF-8 text (byte 7 of an event) (after 2 "
                             "chunks)"),
    "longline": ("malformed", "malformed SSE: a line of over 1,048,576 bytes without a line "
                              "end (after 2 chunks)"),
    "deepjson": ("malformed", "malformed SSE: data is not JSON: '[[[["),
    "truncated": ("truncated", "the stream ended after 2 chunks without [DONE] or a finish "
                               "reason"),
    "json": ("not-sse", "the reply is application/json, not a stream of Server-Sent Events"),
    "html": ("not-sse", "the reply is text/html, not a stream of Server-Sent Events"),
}
# streams that are odd but whole: keep-alive events with empty data between the chunks, and
# a body that ends after the finish reason without [DONE]
WHOLE = ("ok", "keepalive", "nodone")


def test_each_fault_is_counted_and_named_and_the_others_complete(fake_server):
    server = fake_server()
    work = []
    for mode in ["ok", *FAULTS, *WHOLE]:
        work += [WorkloadRequest(0.0, 16, 8, prompt=f"[fake:{mode}] hello")] * 2
    for api in ("completions", "chat"):
        result = EndpointRun(quick_settings(server.url, api=api, concurrency=8,
                                            read_timeout_s=0.5), work).run()
        by_mode = {}
        for r in result.results:
            by_mode.setdefault(work[r.index].prompt.split("]")[0][6:], []).append(r)
        for mode in WHOLE:
            assert all(r.ok and r.output_tokens == len(r.chunk_times_s) == 8
                       and r.text == "t0 t1 t2 t3 t4 t5 t6 t7 " for r in by_mode[mode]), mode
        for mode, (kind, text) in FAULTS.items():
            assert [r.error_kind for r in by_mode[mode]] == [kind] * 2, (api, mode)
            assert all(r.error.startswith(text) for r in by_mode[mode]), by_mode[mode][0].error
        kinds = Counter(kind for kind, _ in FAULTS.values())
        assert result.failures == {kind: 2 * n for kind, n in kinds.items()}
        m = result.metrics
        assert (m.completed, m.failed, result.incomplete) == (8, 2 * len(FAULTS), 0)
        assert m.ttft_s.count == 8  # only the completed requests are scored


def test_a_wrong_key_fails_every_request_by_name_and_is_scrubbed(fake_server):
    key = "sk-this-is-the-wrong-key-42"
    server = fake_server(api_key="sk-the-right-one-000000")
    result = EndpointRun(quick_settings(server.url, model="fake-model", probe=False,
                                        concurrency=2), requests(4), api_key=key).run()
    assert result.failures == {"auth": 4}
    assert {r.error for r in result.results} == {"HTTP 401: Incorrect API key provided: ***"}


def test_the_request_limit_cuts_a_slow_stream(fake_server):
    server = fake_server(token_interval_s=0.05)
    result = EndpointRun(quick_settings(server.url, concurrency=1, request_timeout_s=0.3),
                         requests(1, output_tokens=100)).run()
    (r,) = result.results
    assert r.error_kind == "timeout"
    assert r.error.startswith("timeout after 0.3 s (the request's limit) after ")
    assert 0 < len(r.chunk_times_s) < 100  # cut mid-stream (how far: the machine's speed)


def test_connection_refused_mid_run_is_named(fake_server):
    server = fake_server()
    url = server.url
    server.stop()
    result = EndpointRun(quick_settings(url, model="m", probe=False, concurrency=2),
                         requests(3)).run()
    assert result.failures == {"connect": 3}
    assert "(connection refused): is the server running?" in result.results[0].error
