"""Prometheus scraping: every series named as the server names it, the common set for vLLM,
SGLang and llama.cpp, a real prometheus-client exporter scraped live, no /metrics noted."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from inferlab.engines.endpoint.client import make_client
from inferlab.engines.endpoint.load import EndpointRun, server_agreement
from inferlab.engines.endpoint.scrape import (
    MetricsFormatError,
    Scraper,
    common_values,
    parse_metrics,
    server_kind,
)

from .conftest import quick_settings, requests

SGLANG = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 5
sglang:num_running_reqs{model_name="m",tp_rank="1"} 2
sglang:num_queue_reqs{model_name="m"} 3
sglang:token_usage{model_name="m"} 0.28
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 7.5e+06
"""
LLAMACPP = """\
llamacpp:requests_processing 1
llamacpp:requests_deferred 4
llamacpp:kv_cache_usage_ratio 0.5
llamacpp:tokens_predicted_total 39080
llamacpp:predicted_tokens_seconds nan
"""


def test_sglang_and_llamacpp_names_map_onto_the_common_set():
    s = parse_metrics(SGLANG)
    assert s['sglang:num_running_reqs{model_name="m",tp_rank="1"}'] == 2
    assert common_values(s) == {"running": 7, "waiting": 3, "kv_usage_frac": 0.28,
                                "generation_tokens": 7.5e6}
    assert server_kind(s) == "sglang"
    ll = parse_metrics(LLAMACPP)
    assert "llamacpp:predicted_tokens_seconds" not in ll  # NaN is no value
    assert common_values(ll) == {"running": 1, "waiting": 4, "kv_usage_frac": 0.5,
                                 "generation_tokens": 39080}
    assert server_kind(ll) == "llama.cpp"


def test_not_prometheus_text_is_a_format_error():
    with pytest.raises(MetricsFormatError, match="not Prometheus text"):
        parse_metrics("<html>\n<body>hello</body>\n")


@pytest.fixture
def vllm_exporter():
    """vLLM's metric names exported by prometheus-client's own HTTP server."""
    reg = CollectorRegistry()
    labels = ["model_name"]
    m = {
        "running": Gauge("vllm:num_requests_running", "running", labels, registry=reg),
        "waiting": Gauge("vllm:num_requests_waiting", "waiting", labels, registry=reg),
        "kv": Gauge("vllm:kv_cache_usage_perc", "kv", labels, registry=reg),
        "preempt": Counter("vllm:num_preemptions", "preemptions", labels, registry=reg),
        "gen": Counter("vllm:generation_tokens", "tokens", labels, registry=reg),
        "ttft": Histogram("vllm:time_to_first_token_seconds", "ttft", labels, registry=reg,
                          buckets=(0.01, 0.1, 1.0)),
        "itl": Histogram("vllm:inter_token_latency_seconds", "itl", labels, registry=reg),
    }
    httpd, thread = start_http_server(0, addr="127.0.0.1", registry=reg)
    yield f"http://127.0.0.1:{httpd.server_port}", {k: v.labels("x") for k, v in m.items()}
    httpd.shutdown()
    httpd.server_close()


async def _scrapes_reach(scraper, n: int, guard_s: float = 30.0) -> None:
    """Wait until `scraper` has polled n times (a hang guard, not a speed bound)."""
    deadline = time.perf_counter() + guard_s
    while scraper.scrapes < n and time.perf_counter() < deadline:
        await asyncio.sleep(0.02)
    assert scraper.scrapes >= n, f"{scraper.scrapes} scrapes after {guard_s} s"


def test_a_prometheus_client_exporter_is_scraped_live(vllm_exporter):
    url, m = vllm_exporter
    m["running"].set(3)
    m["kv"].set(0.25)
    m["ttft"].observe(0.05)

    async def scrape():
        t0 = time.perf_counter()
        async with make_client(url, None, 2, 2.0, 2.0) as client:
            scraper = Scraper(client, lambda: time.perf_counter() - t0, hz=4)
            task = asyncio.ensure_future(scraper.run())
            await _scrapes_reach(scraper, 2)  # counted, not timed: a loaded machine is slow
            m["running"].set(7)
            m["waiting"].set(2)
            m["kv"].set(0.75)
            m["preempt"].inc(5)
            m["gen"].inc(100)
            m["ttft"].observe(0.5)
            await _scrapes_reach(scraper, 4)
            scraper.stop()
            await task
            return scraper.result()

    r = asyncio.run(scrape())
    assert r.kind == "vllm" and r.scrapes >= 4 and r.notes == ()
    running = r.common["running"]
    assert running[0, 1] == 3 and running[-1, 1] == 7
    gaps = running[1:-1, 0] - running[:-2, 0]  # the last scrape comes at stop(), early
    assert (gaps > 0.2).all()  # 4 Hz at most
    assert r.common["kv_usage_frac"][-1, 1] == 0.75
    assert r.common["waiting"][-1, 1] == 2
    assert r.delta("preemptions")[0] == 5 and r.delta("generation_tokens")[0] == 100
    assert r.common["ttft_count"][-1, 1] == 2
    assert r.common["ttft_sum_s"][-1, 1] == pytest.approx(0.55)
    series = r.series
    assert series['vllm:kv_cache_usage_perc{model_name="x"}'][-1, 1] == 0.75
    assert series['vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="x"}'][-1, 1] == 1
    assert 'vllm:inter_token_latency_seconds_count{model_name="x"}' in series
    assert any(name.startswith("python_") or name.startswith("vllm:") for name in series)


def test_no_metrics_is_noted_once_and_polling_stops(fake_server):
    server = fake_server(token_interval_s=0.05)
    result = EndpointRun(quick_settings(server.url, concurrency=2, scrape_hz=4),
                         requests(2, output_tokens=10)).run()
    assert result.metrics.completed == 2
    assert result.scrape.notes == ("no /metrics",) and result.scrape.scrapes == 0


def test_the_servers_own_gauges_during_a_run(fake_server):
    server = fake_server(token_interval_s=0.02, metrics=True)
    result = EndpointRun(quick_settings(server.url, concurrency=5, scrape_hz=4),
                         requests(10, output_tokens=40)).run()
    running = result.scrape.common["running"]
    assert running[:, 1].max() == 5 and running[-1, 1] == 0  # the last scrape after the run
    assert result.scrape.delta("generation_tokens")[0] == 400
    assert result.to_dict()["server_metrics"]["kind"] == "vllm"
    figures = server_agreement(result)
    assert figures["server_ttft_mean_s"] is None  # the fake server has no TTFT histogram
    # how close the two rates come depends on the scrapes' timing: `bench endpoint`
    # (scrape_agreement) measures it; here, that both are read from the same 400 tokens
    tokens, span_s = result.scrape.delta("generation_tokens")
    assert figures["server_output_tokens_per_s"] == pytest.approx(tokens / span_s)
    assert figures["client_output_tokens_per_s"] == result.metrics.output_tokens_per_s
