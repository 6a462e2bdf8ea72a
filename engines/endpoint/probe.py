"""Before a run: is this an OpenAI-compatible server we may talk to, and which model?

`probe` asks `/v1/models` (the model list; `owned_by` tells vLLM, SGLang and llama.cpp
apart) and then streams ONE token from the chosen API. Any of the user's mistakes becomes an
`EndpointError` with one sentence: nothing listening, a key refused, a server that answers
404 or HTML or JSON where an SSE stream should be. `check_endpoint` is the same from
synchronous code (the lab's "check" button, the CLI).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

from inferlab.engines.endpoint.client import (
    APIS,
    LENGTH_CONTROLS,
    RequestSpec,
    make_client,
    request_body,
    stream_one,
)
from inferlab.engines.endpoint.url import (
    EndpointError,
    api_root,
    connect_failure,
    host_of,
    not_openai,
    refused_key,
    scrub,
)

# /v1/models `owned_by` of each server (llama-cpp-python answers "me").
OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp", "me": "llama-cpp-python"}
PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ProbeResult:
    root: str
    model: str
    server_kind: str
    models: tuple[str, ...] = ()
    owned_by: str | None = None
    ttft_s: float | None = None


def guess_kind(owned_by: str | None) -> str:
    return OWNERS.get((owned_by or "").lower(), "openai")


async def _models(client: httpx.AsyncClient, root: str, has_key: bool, secret: str | None):
    try:
        resp = await client.get("/v1/models", timeout=PROBE_TIMEOUT_S)
    except httpx.TransportError as e:
        raise EndpointError(connect_failure(e, root)) from None
    if resp.status_code in (401, 403):
        raise EndpointError(refused_key(resp.status_code, root, has_key))
    if 300 <= resp.status_code < 400:
        where = scrub(resp.headers.get("location", "elsewhere"), secret)[:80]
        raise EndpointError(f"{host_of(root)} redirects to {where}: enter that URL instead "
                            "(redirects are not followed, so the key goes nowhere else)")
    if resp.status_code != 200:
        return [], None, resp.status_code
    try:
        data = resp.json().get("data") or []
        ids = [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
        owner = next((str(m.get("owned_by")) for m in data
                      if isinstance(m, dict) and m.get("owned_by")), None)
    except (ValueError, AttributeError, TypeError):
        raise EndpointError(not_openai(root, "GET /v1/models did not answer a model list")
                            ) from None
    return ids, owner, 200


async def probe(client: httpx.AsyncClient, root: str, model: str | None, api: str,
                server_kind: str = "auto", include_usage: bool = True,
                secret: str | None = None) -> ProbeResult:
    """Check the server with the client the run will use; EndpointError says what is wrong."""
    ids, owner, status = await _models(client, root, secret is not None, secret)
    if not model:
        if status != 200:
            raise EndpointError(not_openai(root, f"GET /v1/models answered HTTP {status} "
                                                 "(give a model name to try anyway)"))
        if not ids:
            raise EndpointError(f"give a model name: {host_of(root)} lists none at /v1/models")
        model = ids[0]
    kind = guess_kind(owner) if server_kind == "auto" else server_kind
    path = APIS[api]
    spec = RequestSpec(index=-1, scheduled_s=0.0, path=path, prompt="Hello", prompt_tokens=1,
                       requested_tokens=1, body=request_body(api, model, "Hello", 1, kind,
                                                             include_usage))
    t0 = time.perf_counter()
    r = await stream_one(client, spec, lambda: time.perf_counter() - t0, chat=api == "chat",
                         read_timeout_s=PROBE_TIMEOUT_S, request_timeout_s=PROBE_TIMEOUT_S,
                         secret=secret)
    if r.error_kind == "auth":
        raise EndpointError(refused_key(r.http_status, root, secret is not None))
    if r.error_kind == "connect":
        raise EndpointError(r.error)
    if r.error_kind == "http" and r.http_status in (404, 405):
        raise EndpointError(not_openai(root, f"POST {path} answered HTTP {r.http_status}"))
    if r.error_kind in ("not-sse", "malformed", "truncated"):
        raise EndpointError(not_openai(root, f"POST {path}: {r.error}"))
    if r.error is not None:
        hint = ""
        if r.error_kind == "http" and r.http_status == 400 and LENGTH_CONTROLS[kind]:
            hint = f" (it may not take {' or '.join(LENGTH_CONTROLS[kind])}: try server kind " \
                   "'openai')"
        raise EndpointError(f"{host_of(root)} failed a one-token request for model "
                            f"{model!r}: {r.error}{hint}")
    return ProbeResult(root=root, model=model, server_kind=kind, models=tuple(ids),
                       owned_by=owner, ttft_s=r.ttft_s)


def check_endpoint(url: str, api_key: str | None = None, model: str | None = None,
                   api: str = "completions", server_kind: str = "auto",
                   timeout_s: float = 10.0) -> ProbeResult:
    """`probe` from synchronous code, with a client of its own."""
    root = api_root(url)

    async def main():
        async with make_client(root, api_key, 2, timeout_s, timeout_s) as client:
            return await probe(client, root, model, api, server_kind, secret=api_key or None)

    return asyncio.run(main())
