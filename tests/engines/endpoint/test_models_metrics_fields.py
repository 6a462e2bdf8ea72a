"""Wrong values at every field the client reads of /v1/models (through the probe) and of
/metrics (through the scraper), and the transport faults of both, from the fake server over a
real socket: each ends in success or the client's own failure (EndpointError naming the field;
a scraper note), never another exception, never a hang."""

from __future__ import annotations

import asyncio
import time

from inferlab.engines.endpoint.client import make_client
from inferlab.engines.endpoint.probe import MAX_MODELS_BYTES, probe
from inferlab.engines.endpoint.scrape import MAX_BODY_BYTES, Scraper
from inferlab.engines.endpoint.url import EndpointError

from .hostile import FIRST_ITEM_WRONG, OBJECTS, VALUES, dumps, put, show

MODELS = {"object": "list", "data": [{"id": "m-1", "object": "model", "owned_by": "vllm"}]}
MODEL_FIELDS = [(), ("data",), ("data", 0), ("data", 0, "id"), ("data", 0, "owned_by")]
NONE_LISTED = "lists none at /v1/models"


def expect_models(path: tuple, name: str) -> str | None:
    """None: the probe succeeds; else the text its EndpointError holds."""
    where = show(path)
    if name == "too deep":
        return "did not answer a model list (not JSON)"
    if not path:
        return NONE_LISTED if name in OBJECTS else "the top level is "
    if where == "data":
        if name in ("null", "empty list"):
            return NONE_LISTED
        return "`data[0]` is " if name in FIRST_ITEM_WRONG else "`data` is "
    if where == "data[0]":
        return "`data[0].id` is null or empty" if name in OBJECTS else "`data[0]` is "
    if where == "data[0].id":
        return None if name == "text" else "`data[0].id` is "
    return None if name in {"null", "text", "empty text"} else "`data[0].owned_by` is "


def _serve(server, path: str, body, fault) -> None:
    """The fake server answers GET `path` with `body`, or with the GET `fault` (one or none)."""
    server.replies.pop(path, None)
    server.faults.pop(path, None)
    if body is not None:
        server.replies[path] = body
    if fault is not None:
        server.faults[path] = fault


def probe_all(url: str, server, cases, timeout_s: float = 5.0) -> list:
    """Each case (a path's name, a body or a GET fault) through one probe; outcomes."""

    async def main():
        out = []
        async with make_client(url, None, 2, timeout_s, timeout_s) as client:
            for body, fault in cases:
                _serve(server, "/v1/models", body, fault)
                try:
                    out.append(await probe(client, url, None, "completions",
                                           timeout_s=timeout_s))
                except EndpointError as e:
                    out.append(e)
        return out

    return asyncio.run(main())


def test_a_wrong_value_at_any_field_of_the_model_list_is_named(fake_server):
    server = fake_server()
    cases = [(path, name) for path in MODEL_FIELDS for name in VALUES]
    outcomes = probe_all(server.url, server,
                         [(dumps(put(MODELS, path, VALUES[name])), None) for path, name in cases])
    failed = 0
    for (path, name), got in zip(cases, outcomes, strict=True):
        want = expect_models(path, name)
        case = f"{show(path) or '(answer)'} = {name}: {got}"
        if want is None:
            assert not isinstance(got, Exception), case
            assert got.model == ("x" if show(path) == "data[0].id" else "m-1"), case
        else:
            failed += 1
            assert isinstance(got, EndpointError), case
            assert want in str(got), case
    assert 0 < len(cases) - failed < failed
    by_case = dict(zip([(show(p), n) for p, n in cases], outcomes, strict=True))
    assert str(by_case["data[0].id", "int"]) == (
        f"{server.url[7:]} does not look like an OpenAI-compatible server: GET /v1/models did "
        "not answer a model list: `data[0].id` is a number, not text")
    assert "`data[0].owned_by` is text of 100,000 characters, not at most 256" in str(
        by_case["data[0].owned_by", "long text"])
    assert by_case["data[0].owned_by", "null"].server_kind == "openai"


MODEL_FAULTS = {
    "stall": "did not answer GET /v1/models within 0.3 s",
    "reset": "GET /v1/models on 127.0.0.1:",
    "http500": "GET /v1/models answered HTTP 500 (give a model name to try anyway)",
    "html": "GET /v1/models did not answer a model list (not JSON)",
    "nonutf8": "GET /v1/models sent bytes that are not UTF-8",
    "huge": f"GET /v1/models sent over {MAX_MODELS_BYTES:,} bytes, not a model list",
}


def test_transport_faults_of_the_model_list_are_named(fake_server):
    server = fake_server()
    outcomes = probe_all(server.url, server, [(None, f) for f in MODEL_FAULTS], timeout_s=0.3)
    for (fault, want), got in zip(MODEL_FAULTS.items(), outcomes, strict=True):
        assert isinstance(got, EndpointError) and want in str(got), (fault, got)


# ---- /metrics -------------------------------------------------------------------------------

METRICS = {  # common key -> (server's series, the value the base exposition has)
    "running": ("vllm:num_requests_running", "3"),
    "waiting": ("vllm:num_requests_waiting", "1"),
    "kv_usage_frac": ("vllm:kv_cache_usage_perc", "0.25"),
    "preemptions": ("vllm:num_preemptions_total", "2"),
    "generation_tokens": ("vllm:generation_tokens_total", "400"),
    "ttft_sum_s": ("vllm:time_to_first_token_seconds_sum", "1.5"),
    "ttft_count": ("vllm:time_to_first_token_seconds_count", "10"),
}
# a sample's value as text -> parsed (a float, "error": not Prometheus text)
TOKENS = {"abc": "error", "": "error", "true": "error", '"7"': "error", "[1]": "error",
          "{}": "error", "null": "error", "0x10": "error", "1_000": "error",
          "NaN": float("nan"), "+Inf": float("inf"), "-Inf": float("-inf"),
          "1e400": float("inf"), "-1": -1.0, "0": 0.0, "0.5": 0.5, "7": 7.0, "1e308": 1e308,
          "5 123": 5.0, "5 abc": "error"}
# mutations of a line's shape, the series it touches: -> "error" or None (scraped as usual)
SHAPES = {
    'vllm:num_requests_running{model_name=5} 3': "error",
    'vllm:num_requests_running{model_name="m" 3': "error",
    'vllm:num_requests_running{model_name="m",model_name="n"} 3': "error",
    'vllm:num_requests_running{model_name="' + "z" * 100_000 + '"} 3': None,
    '# TYPE vllm:num_requests_running histogram': None,
    '# HELP': None,
    '<html><body>502 Bad Gateway</body></html>': "error",
}


def exposition(replace: dict[str, str] | None = None, extra: str = "") -> bytes:
    lines = [f'{name}{{model_name="m"}} {(replace or {}).get(key, value)}'
             for key, (name, value) in METRICS.items()]
    return ("\n".join(lines) + "\n" + extra).encode()


def scrape_all(url: str, server, cases, timeout_s: float = 5.0) -> list[Scraper]:
    """One fresh scraper's single poll per case (a body or a GET fault)."""

    async def main():
        out = []
        async with make_client(url, None, 2, timeout_s, timeout_s) as client:
            for body, fault in cases:
                _serve(server, "/metrics", body, fault)
                t0 = time.perf_counter()
                scraper = Scraper(client, lambda t0=t0: time.perf_counter() - t0,
                                  timeout_s=timeout_s)
                await scraper.scrape_once()
                out.append(scraper)
        return out

    return asyncio.run(main())


def test_a_wrong_value_at_any_common_series_is_left_out_or_stops_scraping(fake_server):
    server = fake_server()
    cases = [(key, token) for key in METRICS for token in TOKENS]
    scrapers = scrape_all(server.url, server,
                          [(exposition({key: token}), None) for key, token in cases])
    for (key, token), scraper in zip(cases, scrapers, strict=True):
        result = scraper.result()
        value = TOKENS[token]
        case = f"{key} = {token!r}: {result.notes}"
        if value == "error":
            assert result.scrapes == 0 and len(result.notes) == 1, case
            assert result.notes[0].startswith("/metrics is not Prometheus text ("), case
            continue
        assert result.scrapes == 1, case
        others = {k: float(v) for k, (_, v) in METRICS.items() if k != key}
        assert {k: v[0, 1] for k, v in result.common.items() if k != key} == others, case
        low, high = (0.0, 1.0) if key == "kv_usage_frac" else (0.0, float("inf"))
        if value != value or value in (float("inf"), float("-inf")):
            assert key not in result.common and result.notes == (), case  # not a value
        elif low <= value <= high:
            assert result.common[key][0, 1] == value and result.notes == (), case
        else:
            assert key not in result.common, case
            assert result.notes == (f"/metrics: {METRICS[key][0]} is {value:.6g}, not "
                                    f"{'a fraction from 0 to 1' if high == 1 else 'a finite number >= 0'}"
                                    "; such values are left out",), case


def test_shapes_sums_and_transport_faults_of_metrics(fake_server):
    server = fake_server()
    bodies = [exposition(extra=line + "\n") for line in SHAPES]
    # two label sets whose sum overflows a double: a common value that is not finite
    bodies.append(exposition(extra='vllm:generation_tokens_total{model_name="n"} 1.7e308\n'
                                   'vllm:generation_tokens_total{model_name="o"} 1.7e308\n'))
    faults = ["stall", "reset", "http500", "html", "nonutf8", "huge"]
    scrapers = scrape_all(server.url, server, [(b, None) for b in bodies]
                          + [(None, f) for f in faults], timeout_s=0.3)
    for (line, want), scraper in zip(SHAPES.items(), scrapers, strict=False):
        result = scraper.result()
        if want == "error":
            assert result.scrapes == 0 and result.notes[0].startswith(
                "/metrics is not Prometheus text"), (line[:60], result.notes)
        else:
            assert result.scrapes == 1 and result.common["kv_usage_frac"][0, 1] == 0.25, \
                (line[:60], result.notes)
    overflow = scrapers[len(SHAPES)].result()
    assert "generation_tokens" not in overflow.common and overflow.common["running"][0, 1] == 3
    assert overflow.notes == ("/metrics: vllm:generation_tokens_total is inf, not a finite "
                              "number >= 0; such values are left out",)
    notes = [s.result().notes for s in scrapers[len(SHAPES) + 1:]]
    # a reset reads as ReadError or RemoteProtocolError, by when the RST lands
    assert notes[1][0] in ("/metrics could not be read (ReadError); still trying",
                           "/metrics could not be read (RemoteProtocolError); still trying")
    assert notes[:1] + notes[2:] == [
        ("/metrics could not be read (ReadTimeout); still trying",),
        ("/metrics answered HTTP 500; scraping stopped",),
        ("/metrics is not Prometheus text (invalid metric name:<html><body><h1>Sign in to the "
         "proxy</h1></body></html>); scraping stopped",),
        ("/metrics is not UTF-8 text (byte 18); scraping stopped",),
        (f"/metrics is over {MAX_BODY_BYTES:,} bytes; scraping stopped",),
    ]
