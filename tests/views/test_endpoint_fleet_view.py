"""The endpoint lab with several servers: the URL field holds them all (the first is `url`,
the rest `urls`), the router is a choice, and the timeline's strips draw each server's
/metrics in a colour of its own with a legend naming it."""

from __future__ import annotations

from inferlab.engines.endpoint.fake_server import FakeServer
from inferlab.engines.endpoint.load import EndpointRun
from inferlab.engines.labs.endpoint.records import EndpointRecord
from inferlab.engines.labs.endpoint.settings import ENDPOINT_DEFAULTS
from inferlab.views.endpoint_timeline import EndpointTimelineView
from inferlab.views.endpoint_view import EndpointView
from tests.engines.endpoint.conftest import quick_settings, requests


def test_several_urls_and_the_router_round_trip(qtbot):
    view = EndpointView()
    qtbot.addWidget(view)
    wanted = dict(ENDPOINT_DEFAULTS, url="http://127.0.0.1:8001",
                  urls=["http://127.0.0.1:8002", "http://127.0.0.1:8003"], router="prefix")
    view.set_settings(wanted)
    got = view.settings()
    assert (got["url"], got["urls"], got["router"]) == (wanted["url"], wanted["urls"],
                                                        "prefix")
    view.url.setText("http://a:1, http://b:2")
    assert view.settings()["urls"] == ["http://b:2"]


def test_each_server_gets_its_own_curves(qtbot):
    servers = [FakeServer(metrics=True, token_interval_s=0.002).start() for _ in range(2)]
    try:
        settings = quick_settings(servers[0].url, urls=(servers[1].url,), concurrency=2,
                                  scrape_hz=4)
        record = EndpointRecord.of(EndpointRun(settings, requests(6)).run())
    finally:
        for s in servers:
            s.stop()
    view = EndpointTimelineView()
    qtbot.addWidget(view)
    view.draw(record)
    labels = [label.text for _, label in view.server_legend.items]
    assert labels == [f"server {j + 1} ({s.url})" for j, s in enumerate(servers)]
    assert len(view._server_curves) >= 2
    view.draw(None, "cleared")
    assert not view._server_curves and not view.server_legend.isVisible()
