"""The endpoint's URL, and one clear sentence for each way of getting it wrong.

Only the URL the user typed is ever contacted: `api_root` checks it (http or https, a host, no
credentials, query or fragment in it: the URL is recorded in results and snapshots, so a
secret must not ride in it) and drops a trailing `/v1`, so that `http://host:8000` and
`http://host:8000/v1` name the same server. The API key travels separately, only as an
`Authorization: Bearer` header to this root (redirects are never followed), and `scrub`
removes it from any text a server or library sends back.
"""

from __future__ import annotations

import errno
from urllib.parse import urlsplit

import httpx


class EndpointError(ValueError):
    """The endpoint cannot be used as given; the message is one sentence for the user."""


def api_root(url: str) -> str:
    """`url` checked and without a trailing slash or `/v1`: the root that /v1/... and /metrics
    hang off. EndpointError for anything but a plain http(s) URL."""
    if not isinstance(url, str) or not url.strip():
        raise EndpointError("enter the server's URL, like http://127.0.0.1:8000")
    url = url.strip()
    parts = urlsplit(url)
    shown = url if len(url) <= 60 else url[:57] + "..."
    if parts.scheme.lower() not in ("http", "https"):
        raise EndpointError(f"{shown!r} is not an http(s) URL: enter one like "
                            "http://127.0.0.1:8000")
    if parts.username is not None or parts.password is not None:
        raise EndpointError("the URL holds a user name or password: give the key in the API "
                            "key field instead, so that it is never recorded")
    if parts.query or parts.fragment:  # not echoed: a key may ride in it
        raise EndpointError("the URL has a query or fragment (?... or #...): enter only the "
                            "server's address, like http://127.0.0.1:8000")
    try:
        port = parts.port
    except ValueError:
        raise EndpointError(f"{shown!r} has a port that is not a number from 0 to 65535"
                            ) from None
    if not parts.hostname:
        raise EndpointError(f"{shown!r} names no host: enter one like http://127.0.0.1:8000")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    netloc = parts.hostname if port is None else f"{parts.hostname}:{port}"
    if ":" in parts.hostname:  # an IPv6 literal keeps its brackets
        netloc = f"[{parts.hostname}]" + ("" if port is None else f":{port}")
    return f"{parts.scheme.lower()}://{netloc}{path}"


def host_of(root: str) -> str:
    return urlsplit(root).netloc


def scrub(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` replaced (a 401 body may echo the key)."""
    if secret and text:
        return text.replace(secret, "***")
    return text


def _errno_of(exc: BaseException) -> int | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno is not None:
            return exc.errno
        exc = exc.__cause__ or exc.__context__
    return None


def connect_failure(exc: httpx.TransportError, root: str) -> str:
    """One sentence for a request that never reached the server."""
    host = host_of(root)
    text = str(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no answer from {host} (connect timed out): is the host up and the port open?"
    code = _errno_of(exc)
    if code == errno.ECONNREFUSED or "refused" in text.lower():
        return f"nothing listens at {host} (connection refused): is the server running?"
    if "name or service not known" in text.lower() or "nodename nor servname" in text.lower() \
            or "getaddrinfo" in text.lower() or "name resolution" in text.lower():
        return f"the host name in {host} does not resolve: check the URL"
    if "ssl" in text.lower() or "certificate" in text.lower():
        return f"the TLS handshake with {host} failed: {text[:120]}"
    return f"cannot connect to {host}: {text[:120] or type(exc).__name__}"


def refused_key(status: int, root: str, has_key: bool) -> str:
    host = host_of(root)
    if has_key:
        return f"the server at {host} refused the API key (HTTP {status}): check the key"
    return f"the server at {host} wants an API key (HTTP {status}): give one"


def not_openai(root: str, what: str) -> str:
    return f"{host_of(root)} does not look like an OpenAI-compatible server: {what}"
