"""The load over several servers at once: each request goes to exactly one, chosen by the
cluster simulator's router policies; each server's /metrics is scraped on its own; the
snapshot keeps which server ran what, and refuses a request naming no server."""

from __future__ import annotations

import copy
import json

import pytest

from inferlab.engines.endpoint.load import EndpointRun, EndpointSettings
from inferlab.engines.endpoint.routing import ServerRouter, prompt_word_ids
from inferlab.engines.labs.endpoint.records import EndpointRecord
from inferlab.engines.labs.endpoint.section import endpoint_section, read_endpoint_section
from inferlab.engines.labs.endpoint.settings import ENDPOINT_DEFAULTS
from tests.engines.endpoint.conftest import quick_settings, requests

TURNS = ("you are a helpful assistant who answers in one line " * 3).split()


def test_router_policies_by_hand():
    rr = ServerRouter("round-robin", 3)
    assert [rr.choose("x", 10) for _ in range(5)] == [0, 1, 2, 0, 1]
    least = ServerRouter("least-tokens", 2)
    assert least.choose("a", 100) == 0
    assert least.choose("b", 10) == 1
    assert least.choose("c", 10) == 1  # 1 holds 10 outstanding, 0 holds 100
    least.done(0, 100)
    assert least.choose("d", 10) == 0
    prefix = ServerRouter("prefix", 2)
    chat = " ".join(TURNS * 2)  # 54 words: three full blocks of 16
    first = prefix.choose(chat, 5)
    prefix.choose("something else entirely", 500)  # loads the other server... or this one
    assert prefix.choose(chat + " and then a follow-up question", 5) == first
    assert prompt_word_ids("a b a") [0] == prompt_word_ids("a")[0]


@pytest.mark.parametrize("router", ["round-robin", "least-tokens", "prefix"])
def test_every_request_runs_on_exactly_one_server(fake_server, router):
    servers = [fake_server(metrics=True), fake_server(metrics=True)]
    settings = quick_settings(servers[0].url, urls=(servers[1].url,), router=router,
                              concurrency=4, scrape_hz=4)
    result = EndpointRun(settings, requests(12)).run()
    assert result.metrics.completed == 12
    assert sorted(r.index for r in result.results) == list(range(12))
    counts = [sum(1 for r in result.results if r.server == j) for j in range(2)]
    assert counts == [s.requests - 1 for s in servers]  # what each saw, less the probe's
    if router == "round-robin":
        assert counts == [6, 6]
    assert len(result.server_scrapes) == 2 and all(sc.scrapes > 0
                                                   for sc in result.server_scrapes)
    assert any("2 servers" in n for n in result.notes)


def test_one_bad_server_is_named(fake_server):
    good = fake_server()
    settings = quick_settings(good.url, urls=("http://127.0.0.1:9",), connect_timeout_s=1.0)
    from inferlab.engines.endpoint.url import EndpointError

    with pytest.raises(EndpointError, match="server 2"):
        EndpointRun(settings, requests(2)).run()
    with pytest.raises(ValueError, match="named twice"):
        EndpointSettings(url=good.url, urls=(good.url,)).checked()
    with pytest.raises(ValueError, match="router"):
        EndpointSettings(url=good.url, router="random").checked()


def test_the_snapshot_keeps_each_servers_requests_and_metrics(fake_server):
    servers = [fake_server(metrics=True), fake_server(metrics=True)]
    settings = quick_settings(servers[0].url, urls=(servers[1].url,), concurrency=2,
                              scrape_hz=4)
    record = EndpointRecord.of(EndpointRun(settings, requests(6)).run())
    lab_settings = dict(ENDPOINT_DEFAULTS, url=servers[0].url, urls=[servers[1].url])
    section = json.loads(json.dumps(endpoint_section(lab_settings, record)))
    assert [s["url"] for s in section["state"]["run"]["servers"]] == [s.url for s in servers]
    run = read_endpoint_section(section).run
    assert [r.server for r in run.results] == [r.server for r in record.results]
    assert [url for url, _ in run.servers] == [s.url for s in servers]
    bad = copy.deepcopy(section)
    bad["state"]["run"]["requests"][0]["server"] = 5
    with pytest.raises(ValueError, match=r"requests\[0\]\.server: no server 5"):
        read_endpoint_section(bad)
