"""One streaming request to an OpenAI-compatible server, timed chunk by chunk.

`stream_one` POSTs a completion or chat completion with stream=true and records, on the run's
clock, the send time, the arrival of every chunk that carries a token and that chunk's token
count, the output text, the finish reason and the server's `usage`. Which chunks are timed
follows `vllm bench serve`: every chunk with a choice, except a chat delta that only names the
role and a closing chunk with no text and a finish reason (llama.cpp sends one), so that
against a one-token-per-chunk server the chunk count equals the output tokens.

Output tokens: the server's `usage.completion_tokens` (asked for with stream_options
include_usage) where it gives it, else `count_tokens(text)` where the caller passes the
model's tokenizer, else one per timed chunk; `token_source` says which.

A request never raises: any failure is `error`, one short named reason ("HTTP 500: ...",
"timeout after 30 s waiting for the first byte", "connection reset mid-stream after 12
chunks", "malformed SSE: ..."), with `error_kind` a stable word for counting. Every field of
a chunk is checked before use (engines/endpoint/chunks.py); a wrong one fails the request as
malformed SSE does, naming the chunk and the field ("chunk 3: `choices[0].text` is a number,
not text"). An event with empty data (a proxy's keep-alive) carries nothing and is skipped.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import httpx

from inferlab.engines.endpoint import fields
from inferlab.engines.endpoint.chunks import read_chunk
from inferlab.engines.endpoint.sse import MalformedSSE, SSEDecoder
from inferlab.engines.endpoint.url import connect_failure, scrub
from inferlab.engines.serve.metrics import RequestTiming

APIS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
MAX_TEXT_CHARS = 1 << 16  # output text kept per request; timings are kept whole
MAX_ERROR_BODY_BYTES = 4096

# What each server kind accepts to make output lengths follow the workload (max_tokens alone
# lets the model stop at EOS). llama-cpp-python takes min_tokens but not ignore_eos (measured
# here); OpenAI's own API rejects both as unknown parameters.
LENGTH_CONTROLS = {
    "vllm": ("ignore_eos", "min_tokens"),
    "sglang": ("ignore_eos", "min_tokens"),
    "llama.cpp": ("ignore_eos",),
    "llama-cpp-python": ("min_tokens",),
    "openai": (),
}
SERVER_KINDS = tuple(LENGTH_CONTROLS)

TokenCounter = Callable[[str], "int | Sequence[int]"]


def make_client(root: str, api_key: str | None, max_connections: int,
                connect_timeout_s: float, read_timeout_s: float,
                tls: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """An HTTP client for `root`. The key goes only into its Authorization header: redirects
    are not followed and the environment's proxies are not used (trust_env=False), so nothing
    but `root` ever sees it. No compression: a gzip layer would hold chunks back and skew
    their arrival times. `tls`: one shared context (httpx builds one per client otherwise,
    ~0.1 s each)."""
    headers = {"Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return httpx.AsyncClient(
        base_url=root, headers=headers, follow_redirects=False, trust_env=False,
        verify=tls if tls is not None else True,
        timeout=httpx.Timeout(connect=connect_timeout_s, read=read_timeout_s,
                              write=read_timeout_s, pool=read_timeout_s),
        limits=httpx.Limits(max_connections=max_connections,
                            max_keepalive_connections=max_connections))


class ClientPool:
    """One single-connection httpx client per request in flight, reused last-in-first-out.

    Why not one client with N connections: httpcore's pool rescans all its connections,
    quadratically, whenever a request starts or ends; at 200 streams that cost ~25 ms of CPU
    per request (measured here). A pool of one connection has nothing to scan, and a reused
    client keeps its connection alive for the next request."""

    def __init__(self, make: Callable[[], httpx.AsyncClient]) -> None:
        self._make = make
        self._idle: list[httpx.AsyncClient] = []
        self._all: list[httpx.AsyncClient] = []

    def take(self) -> httpx.AsyncClient:
        if self._idle:
            return self._idle.pop()
        client = self._make()
        self._all.append(client)
        return client

    def give_back(self, client: httpx.AsyncClient) -> None:
        self._idle.append(client)

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._all), return_exceptions=True)


def count_with(counter: TokenCounter, text: str) -> int:
    """A tokenizer callable's answer as a count: it may return ids or their number."""
    n = counter(text)
    return n if isinstance(n, int) else len(n)


def request_body(api: str, model: str, prompt: str, max_tokens: int, server_kind: str,
                 include_usage: bool = True, temperature: float | None = 0.0) -> dict:
    """The JSON body of one streaming request (`api` "completions" or "chat")."""
    body: dict = {"model": model, "max_tokens": int(max_tokens), "stream": True}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    if temperature is not None:
        body["temperature"] = float(temperature)
    controls = LENGTH_CONTROLS[server_kind]
    if "ignore_eos" in controls:
        body["ignore_eos"] = True
    if "min_tokens" in controls:
        body["min_tokens"] = int(max_tokens)
    return body


@dataclass(frozen=True)
class StreamResult:
    """One request as the client saw it; times in seconds on the run's clock."""

    index: int
    scheduled_s: float             # when the workload meant it to go out
    send_s: float                  # when it went out
    end_s: float                   # when it ended, done or failed
    chunk_times_s: tuple[float, ...]
    chunk_tokens: tuple[int, ...]
    output_tokens: int
    token_source: str              # "usage", "tokenizer" or "chunks"
    prompt_tokens: int
    requested_tokens: int
    text: str = ""
    finish_reason: str | None = None
    http_status: int | None = None
    error: str | None = None
    error_kind: str | None = None  # http, auth, timeout, reset, malformed, server, connect, ...
    server: int = 0                # which of the run's servers it went to (settings' urls)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ttft_s(self) -> float | None:
        return self.chunk_times_s[0] - self.send_s if self.chunk_times_s else None

    @property
    def e2e_s(self) -> float | None:
        return self.chunk_times_s[-1] - self.send_s if self.chunk_times_s else None

    def to_timing(self) -> RequestTiming:
        """For engines.serve.metrics.summarize: arrival = send time (as `vllm bench serve`
        starts its clock when the request goes out), times per chunk, n_out = output_tokens."""
        return RequestTiming(arrival_s=self.send_s, token_times_s=self.chunk_times_s,
                             prompt_tokens=self.prompt_tokens, ok=self.ok,
                             error=self.error or "", token_count=self.output_tokens)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(chunk_times_s=list(self.chunk_times_s), chunk_tokens=list(self.chunk_tokens),
                 ttft_s=self.ttft_s, e2e_s=self.e2e_s)
        return d


@dataclass(frozen=True)
class RequestSpec:
    index: int
    scheduled_s: float
    path: str
    body: dict
    prompt: str
    prompt_tokens: int             # the workload's figure, used when the server gives none
    requested_tokens: int


class _Failed(Exception):
    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind = kind


class _Stream:
    """What one request has gathered so far; the failure paths read it too."""

    def __init__(self, spec: RequestSpec, chat: bool, counter: TokenCounter | None) -> None:
        self.spec, self.chat, self.counter = spec, chat, counter
        self.times: list[float] = []
        self.tokens: list[int] = []
        self.text: list[str] = []
        self.text_chars = 0
        self.status: int | None = None
        self.usage: tuple[int | None, int | None] | None = None  # (prompt, completion)
        self.events = 0  # events with data, for naming the chunk at fault
        self.finish: str | None = None
        self.done = False
        self.error: tuple[str, str] | None = None
        self.send_s = spec.scheduled_s

    def event(self, data: str, now: float) -> None:
        """One event's data; MalformedSSE, FieldError or _Failed where it is wrong."""
        if not data or data.isspace():  # a keep-alive: an empty event carries nothing
            return
        self.events += 1
        if data.strip() == "[DONE]":
            self.done = True
            return
        chunk = read_chunk(data, self.chat)
        if chunk.error is not None:
            raise _Failed("server", f"server error mid-stream: {chunk.error}")
        if chunk.usage is not None:
            self.usage = chunk.usage
        if not chunk.has_choice:
            return
        if chunk.finish is not None:
            self.finish = chunk.finish
        piece = chunk.piece
        if not piece and (chunk.role or chunk.finish is not None):
            return  # a chat delta naming the role only, or a closing chunk with no text
        self.times.append(now)
        self.tokens.append(max(1, count_with(self.counter, piece)) if self.counter and piece
                           else 1)
        if self.text_chars < MAX_TEXT_CHARS:
            self.text.append(piece)
            self.text_chars += len(piece)

    def result(self, end_s: float, secret: str | None) -> StreamResult:
        text = "".join(self.text)[:MAX_TEXT_CHARS]
        usage_prompt, usage_out = self.usage or (None, None)  # counts, checked by chunks
        out, source = sum(self.tokens), "chunks"
        if usage_out is not None:
            out, source = usage_out, "usage"
        elif self.counter is not None:
            out, source = count_with(self.counter, text), "tokenizer"
        prompt = self.spec.prompt_tokens
        if usage_prompt is not None:
            prompt = usage_prompt
        elif self.counter is not None:
            prompt = count_with(self.counter, self.spec.prompt)
        kind, error = self.error or (None, None)
        return StreamResult(
            index=self.spec.index, scheduled_s=self.spec.scheduled_s, send_s=self.send_s,
            end_s=max(end_s, self.send_s), chunk_times_s=tuple(self.times),
            chunk_tokens=tuple(self.tokens), output_tokens=max(0, int(out)),
            token_source=source, prompt_tokens=max(0, int(prompt)),
            requested_tokens=self.spec.requested_tokens, text=scrub(text, secret),
            finish_reason=self.finish, http_status=self.status,
            error=None if error is None else scrub(error, secret), error_kind=kind)

    def fail(self, kind: str, text: str) -> None:
        if self.error is None:
            self.error = (kind, text)

    @property
    def n(self) -> int:
        return len(self.times)


def _first_line(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:  # OpenAI-style {"error": {"message": ...}} bodies: the message is the useful part
        obj = json.loads(text)
    except (ValueError, RecursionError):
        obj = None
    err = obj.get("error") if isinstance(obj, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    detail = obj.get("detail") if isinstance(obj, dict) else None
    for said in (message, detail):  # only clean text replaces the body's own first line
        if isinstance(said, str) and said.strip() and fields.is_unicode(said):
            text = said.strip()
            break
    line = text.splitlines()[0] if text else "(empty body)"
    return line if len(line) <= 160 else line[:157] + "..."


async def _run(client: httpx.AsyncClient, st: _Stream, clock: Callable[[], float],
               read_timeout_s: float) -> None:
    spec = st.spec
    try:
        st.send_s = clock()
        async with client.stream("POST", spec.path, json=spec.body) as resp:
            st.status = resp.status_code
            if resp.status_code != 200:
                body = b""
                async for piece in resp.aiter_bytes():
                    body += piece
                    if len(body) >= MAX_ERROR_BODY_BYTES:
                        break
                kind = "auth" if resp.status_code in (401, 403) else "http"
                raise _Failed(kind, f"HTTP {resp.status_code}: {_first_line(body)}")
            ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype and ctype != "text/event-stream":
                raise _Failed("not-sse", f"the reply is {ctype}, not a stream of "
                                         "Server-Sent Events")
            decoder = SSEDecoder()
            # raw bytes skip httpx's decoder layer (a measurable share of the per-chunk cost)
            # where nothing is to decode: we ask for identity, most servers send it
            encoded = resp.headers.get("content-encoding", "identity").lower() != "identity"
            async for piece in (resp.aiter_bytes() if encoded else resp.aiter_raw()):
                now = clock()
                for ev in decoder.feed(piece):
                    st.event(ev.data, now)
            for ev in decoder.close():
                st.event(ev.data, clock())
        if not st.done and st.finish is None:
            st.fail("truncated", f"the stream ended after {st.n} chunks without [DONE] or a "
                                 "finish reason")
    except _Failed as e:
        st.fail(e.kind, str(e))
    except MalformedSSE as e:
        st.fail("malformed", f"{e} (after {st.n} chunks)")
    except fields.FieldError as e:  # the same failure as malformed SSE, naming the field
        st.fail("malformed", f"chunk {st.events}: {e}")
    except httpx.ReadTimeout:
        if st.status is None:
            where = "waiting for the first byte"
        elif st.n == 0:
            where = "waiting for the first token"
        else:
            where = f"with no data after {st.n} chunks"
        st.fail("timeout", f"timeout after {read_timeout_s:g} s {where}")
    except (httpx.ConnectError, httpx.ConnectTimeout) as e:
        st.fail("connect", connect_failure(e, str(client.base_url)))
    except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError) as e:
        if st.status is None:
            st.fail("reset", f"connection closed before a reply ({type(e).__name__})")
        else:
            st.fail("reset", f"connection reset mid-stream after {st.n} chunks")
    except httpx.PoolTimeout:
        st.fail("timeout", f"no free connection within {read_timeout_s:g} s")
    except httpx.HTTPError as e:
        st.fail("transport", f"{type(e).__name__}: {str(e)[:120]}")


async def stream_one(client: httpx.AsyncClient, spec: RequestSpec, clock: Callable[[], float],
                     *, chat: bool, read_timeout_s: float, request_timeout_s: float,
                     counter: TokenCounter | None = None,
                     secret: str | None = None) -> StreamResult:
    """Send `spec` and read its stream to the end; never raises, cancellation included
    (a cancelled request comes back with error_kind "cancelled")."""
    st = _Stream(spec, chat, counter)
    try:
        await asyncio.wait_for(_run(client, st, clock, read_timeout_s), request_timeout_s)
    except asyncio.TimeoutError:
        st.fail("timeout", f"timeout after {request_timeout_s:g} s (the request's limit) "
                           f"after {st.n} chunks")
    except asyncio.CancelledError:
        st.fail("cancelled", f"cancelled after {st.n} chunks")
    return st.result(clock(), secret)
