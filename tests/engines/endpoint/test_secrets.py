"""The API key goes to the server as a bearer token and nowhere else: not in any result, record,
repr, error text, note or log line, even when the server echoes it back."""

from __future__ import annotations

import json
import logging

import pytest

from inferlab.engines.endpoint.load import EndpointRun
from inferlab.engines.endpoint.probe import check_endpoint
from inferlab.engines.endpoint.url import EndpointError

from .conftest import quick_settings, requests

KEY = "sk-inferlab-test-KEY-7f3a9c1e5b"


def test_the_key_is_sent_and_never_recorded(fake_server, caplog):
    caplog.set_level(logging.DEBUG)
    good = fake_server(api_key=KEY, metrics=True)
    wrong = fake_server(api_key="sk-another-key-entirely-00")
    texts = []
    for server, prompt in ((good, ""), (good, "[fake:http500]"), (wrong, "")):
        run = EndpointRun(quick_settings(server.url, model="fake-model", concurrency=2,
                                         probe=False, scrape_hz=4),
                          requests(3, prompt=prompt), api_key=KEY)
        result = run.run()
        texts += [json.dumps(result.to_dict()), repr(result), repr(run), repr(run.settings)]
        texts += [repr(r) for r in result.results]
    assert good.requests == 6  # it was accepted where it is right
    with pytest.raises(EndpointError) as e:
        check_endpoint(wrong.url, api_key=KEY)
    texts.append(str(e.value))
    texts += [record.getMessage() for record in caplog.records]
    texts.append(caplog.text)
    wrong_errors = [t for t in texts if "Incorrect API key provided: ***" in t]
    assert wrong_errors  # the server echoed the key: it came back scrubbed
    blob = "\n".join(texts).encode()
    assert KEY.encode() not in blob and KEY[3:].encode() not in blob
