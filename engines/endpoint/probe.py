"""Before a run: is this an OpenAI-compatible server we may talk to, and which model?

`probe` asks `/v1/models` (the model list; `owned_by` tells vLLM, SGLang and llama.cpp
apart) and then streams ONE token from the chosen API. Any of the user's mistakes becomes an
`EndpointError` with one sentence: nothing listening, a key refused, a server that answers
404 or HTML or JSON where an SSE stream should be. The model list is read strictly (a body
of at most MAX_MODELS_BYTES, UTF-8 JSON, every field it uses checked: `read_model_list`), so a
wrong field is that sentence too: "GET /v1/models: `data[0].id` is a number, not text".
`check_endpoint` is the same from synchronous code (the lab's "check" button, the CLI).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import httpx

from inferlab.engines.endpoint import fields
from inferlab.engines.endpoint.client import (
    APIS,
    LENGTH_CONTROLS,
    RequestSpec,
    make_client,
    request_body,
    stream_one,
)
from inferlab.engines.endpoint.http_get import get_capped
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
MAX_MODELS_BYTES = 4 << 20
MAX_MODELS = 1000            # model ids kept (they go into results and snapshots)
MAX_MODEL_ID_CHARS = 1024
MAX_OWNER_CHARS = 256


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


def read_model_list(value: object) -> tuple[list[str], str | None]:
    """The model ids (at most MAX_MODELS) and the first `owned_by` of a /v1/models answer;
    FieldError for a field of the wrong type or range. Absent or null `data`: no models."""
    if type(value) is not dict:
        raise fields.FieldError("", f"is {fields.describe(value)}, not an object")
    ids: list[str] = []
    owner = None
    for i, entry in enumerate(fields.items(value.get("data"), "data") or ()):
        where = f"data[{i}]"
        if type(entry) is not dict:
            raise fields.FieldError(where, f"is {fields.describe(entry)}, not an object")
        model = fields.text(entry.get("id"), f"{where}.id", MAX_MODEL_ID_CHARS)
        if not model:
            raise fields.FieldError(f"{where}.id", "is null or empty, not a model name")
        owned = fields.text(entry.get("owned_by"), f"{where}.owned_by", MAX_OWNER_CHARS)
        owner = owner or owned or None
        if len(ids) < MAX_MODELS:
            ids.append(model)
    return ids, owner


async def _models(client: httpx.AsyncClient, root: str, has_key: bool, secret: str | None,
                  timeout_s: float = PROBE_TIMEOUT_S):
    try:
        resp, body = await get_capped(client, "/v1/models", MAX_MODELS_BYTES, timeout_s)
    except (httpx.ConnectError, httpx.ConnectTimeout) as e:
        raise EndpointError(connect_failure(e, root)) from None
    except httpx.TimeoutException:
        raise EndpointError(f"{host_of(root)} did not answer GET /v1/models within "
                            f"{timeout_s:g} s") from None
    except httpx.HTTPError as e:  # a reset, a reply that is not HTTP, a broken body encoding
        raise EndpointError(f"GET /v1/models on {host_of(root)} failed: the connection "
                            f"closed or the reply was not HTTP ({type(e).__name__})") from None
    if resp.status_code in (401, 403):
        raise EndpointError(refused_key(resp.status_code, root, has_key))
    if 300 <= resp.status_code < 400:
        where = scrub(resp.headers.get("location", "elsewhere"), secret)[:80]
        raise EndpointError(f"{host_of(root)} redirects to {where}: enter that URL instead "
                            "(redirects are not followed, so the key goes nowhere else)")
    if resp.status_code != 200:
        return [], None, resp.status_code

    def refuse(why: str) -> EndpointError:
        return EndpointError(scrub(not_openai(root, f"GET /v1/models {why}"), secret))

    if len(body) > MAX_MODELS_BYTES:
        raise refuse(f"sent over {MAX_MODELS_BYTES:,} bytes, not a model list")
    try:
        value = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise refuse(f"sent bytes that are not UTF-8 (byte {e.start})") from None
    except (ValueError, RecursionError):
        raise refuse("did not answer a model list (not JSON)") from None
    try:
        ids, owner = read_model_list(value)
    except fields.FieldError as e:
        raise refuse(f"did not answer a model list: {e}") from None
    return ids, owner, 200


async def probe(client: httpx.AsyncClient, root: str, model: str | None, api: str,
                server_kind: str = "auto", include_usage: bool = True,
                secret: str | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Check the server with the client the run will use; EndpointError says what is wrong.
    `timeout_s` bounds each of its two requests."""
    ids, owner, status = await _models(client, root, secret is not None, secret, timeout_s)
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
                         read_timeout_s=timeout_s, request_timeout_s=timeout_s,
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
