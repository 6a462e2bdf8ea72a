"""Bad input: one clear sentence each for a URL that is not http(s), an unreachable host, a
refused key, a server that is not OpenAI-compatible; and the probe's good path."""

from __future__ import annotations

import socket

import pytest

from inferlab.engines.endpoint.probe import check_endpoint
from inferlab.engines.endpoint.url import EndpointError, api_root


@pytest.mark.parametrize("url, root", [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
    ("HTTPS://Example.com/v1/", "https://example.com"),
    ("http://host:8000/proxy/v1", "http://host:8000/proxy"),
    ("  http://[::1]:9000/v1 ", "http://[::1]:9000"),
])
def test_api_root(url, root):
    assert api_root(url) == root


@pytest.mark.parametrize("url, says", [
    ("ftp://127.0.0.1:8000", "is not an http(s) URL"),
    ("127.0.0.1:8000", "is not an http(s) URL"),
    ("file:///etc/passwd", "is not an http(s) URL"),
    ("", "enter the server's URL"),
    ("http://user:secret@host:8000", "user name or password"),
    ("http://host:8000/?key=abc", "query or fragment"),
    ("http://host:99999", "port"),
    ("http://:8000", "names no host"),
])
def test_bad_urls_are_one_sentence(url, says):
    with pytest.raises(EndpointError, match=None) as e:
        api_root(url)
    assert says in str(e.value)
    assert "secret" not in str(e.value) and "abc" not in str(e.value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_host_is_connection_refused():
    port = free_port()
    with pytest.raises(EndpointError, match=rf"nothing listens at 127.0.0.1:{port} "
                                            r"\(connection refused\)"):
        check_endpoint(f"http://127.0.0.1:{port}", timeout_s=2)


def test_wrong_key_and_missing_key(fake_server):
    server = fake_server(api_key="sk-right-key-0123456789")
    with pytest.raises(EndpointError, match=r"refused the API key \(HTTP 401\): check the key"):
        check_endpoint(server.url, api_key="sk-wrong-key-9876543210")
    with pytest.raises(EndpointError, match=r"wants an API key \(HTTP 401\)"):
        check_endpoint(server.url)
    assert check_endpoint(server.url, api_key="sk-right-key-0123456789").model == "fake-model"


@pytest.mark.parametrize("mode, says", [
    ("notopenai", "POST /v1/completions answered HTTP 404"),
    ("json", "the reply is application/json, not a stream of Server-Sent Events"),
    ("garbage", "malformed SSE"),
])
def test_not_openai_compatible(fake_server, mode, says):
    server = fake_server(mode=mode)
    with pytest.raises(EndpointError) as e:
        check_endpoint(server.url, model="m")
    assert "does not look like an OpenAI-compatible server" in str(e.value)
    assert says in str(e.value)


def test_probe_finds_the_model_and_the_kind(fake_server):
    server = fake_server()
    info = check_endpoint(server.url + "/v1", api="chat")
    assert (info.model, info.server_kind, info.models) == ("fake-model", "vllm",
                                                          ("fake-model",))
    assert info.ttft_s is not None and info.ttft_s >= 0
