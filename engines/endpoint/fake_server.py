"""A small OpenAI-compatible streaming server that misbehaves on request, for tests and the
client bench. Not a model: it streams `max_tokens` words "t0 t1 ..." at a fixed pace.

    with FakeServer(token_interval_s=0.01) as server:   # 127.0.0.1, a free port
        server.url                                      # http://127.0.0.1:PORT

A prompt containing `[fake:MODE]` (or the server's `mode`) picks a behaviour: ok, stall (the
request is read, nothing is ever answered), reset (3 chunks, then a TCP reset), http500,
garbage (a 200 whose body is not SSE), json (a 200 application/json completion: stream=true
ignored), truncated (2 chunks, then the body ends cleanly without [DONE]), notopenai (404 on
every /v1 path); and the hostile ones: stallmid (2 chunks, then silence), nonutf8 (2 chunks,
then an event that is not UTF-8), longline (a line longer than the client takes), html (a 200
text/html page), deepjson (an event nested 100,000 lists deep), http500deep (a 500 whose JSON
body nests past any parser), keepalive (empty data events and comments between the chunks:
a normal stream), nodone (a normal stream whose body ends after the finish reason, no [DONE]).
`edit_chunk(request_body, chat, event_index, chunk)` rewrites every event of every stream
before it is sent: it returns the object to send (json.dumps, NaN and Infinity allowed) or the
raw bytes of the event's data. `replies[path]` serves those bytes as a 200 to a GET of `path`
(/v1/models, /metrics); `faults[path]` makes a GET of it stall, reset, http500, html, nonutf8
or huge (a body bigger than the client reads). `api_key` set: requests without that Bearer key get a 401 whose message
echoes what they sent, as OpenAI's does, so that tests can check the client scrubs it.
`metrics=True` serves vLLM-named gauges and counters at /metrics; otherwise /metrics is 404.
`eos_after=N` ends a stream after N tokens (finish "stop") unless the body asks ignore_eos or
min_tokens. `bodies` and `received_s` hold each completion's body and when it was read
(time.perf_counter: the server's clock for arrival tests). `python -m
inferlab.engines.endpoint.fake_server` runs one in its own process
(the bench measures the client alone that way) and prints "PORT n".

HTTP/1.1 by hand over asyncio streams, keep-alive and chunked bodies: a real server would need
a framework and cost the bench's CPU figure more than the client under test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable

_MODE = re.compile(r"\[fake:([a-z0-9]+)\]")
REASONS = {200: "OK", 401: "Unauthorized", 404: "Not Found", 500: "Internal Server Error"}
HUGE_BODY_BYTES = 9 << 20       # above what the client reads of /v1/models and /metrics
LONG_LINE_BYTES = (1 << 20) + 1  # above the client's SSE line limit
DEEP = 100_000


_CANNED = {
    "http500": (500, b"Internal Server Error: the fake engine died\nline 2", "text/plain"),
    "http500deep": (500, b'{"error": ' + b"[" * 5000),
    "html": (200, b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>", "text/html"),
    "json": (200, json.dumps({"choices": [{"text": "hi"}]}).encode()),
}
"""Modes answered by one whole reply: (status, body[, content type])."""


class FakeServer:
    def __init__(self, token_interval_s: float = 0.005, ttft_s: float = 0.0,
                 api_key: str | None = None, mode: str = "ok", metrics: bool = False,
                 usage: bool = True, eos_after: int | None = None, model: str = "fake-model",
                 port: int = 0,
                 edit_chunk: Callable[[dict, bool, int, dict], object] | None = None) -> None:
        self.token_interval_s, self.ttft_s = token_interval_s, ttft_s
        self.api_key, self.mode, self.metrics, self.usage = api_key, mode, metrics, usage
        self.eos_after, self.model, self.port = eos_after, model, port
        self.edit_chunk = edit_chunk
        self.replies: dict[str, bytes] = {}  # GET path -> a 200 with this body
        self.faults: dict[str, str] = {}
        self.requests = 0            # completions asked for
        self.running = 0             # streams open now
        self.peak_running = 0
        self.open_connections = 0
        self.generated_tokens = 0
        self.bodies: list[dict] = []
        self.received_s: list[float] = []  # time.perf_counter() as each body was read
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- life ---------------------------------------------------------------------------------

    async def serve(self, ready: threading.Event | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", self.port,
                                                  backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        if ready is not None:
            ready.set()
        async with self._server:
            try:
                await self._server.serve_forever()
            except asyncio.CancelledError:
                pass

    def start(self) -> FakeServer:
        self._thread = threading.Thread(target=lambda: asyncio.run(self.serve(self._ready)),
                                        name="fake-openai-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fake server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None and not self._loop.is_closed():
            def close():
                self._server.close()
                for task in asyncio.all_tasks():
                    task.cancel()

            try:
                self._loop.call_soon_threadsafe(close)
            except RuntimeError:  # the loop closed meanwhile: already stopped
                pass
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- HTTP ---------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        self.open_connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if not await self._route(method, path, headers, body, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # the server stops: end quietly, not as a logged error
            pass
        finally:
            self.open_connections -= 1
            writer.close()

    def _reply(self, writer, status: int, body: bytes, ctype: str = "application/json") -> None:
        writer.write(f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
                     f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
                     .encode() + body)

    @staticmethod
    def _reset(writer) -> None:
        """A TCP reset: close with SO_LINGER 0."""
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def _get_fault(self, fault, path, reader, writer) -> bool:
        ctype = "application/json" if path.startswith("/v1/") else "text/plain"
        if fault == "stall":
            while await reader.read(4096):
                pass
            return False
        if fault == "reset":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype.encode()
                         + b"\r\nContent-Length: 1000\r\n\r\n{")
            await writer.drain()
            self._reset(writer)
            return False
        if fault == "http500":
            self._reply(writer, 500, b"Internal Server Error", "text/plain")
        elif fault == "html":
            self._reply(writer, 200, b"<html><body><h1>Sign in to the proxy</h1></body></html>",
                        "text/html")
        elif fault == "nonutf8":
            self._reply(writer, 200, b'{"data": [{"id": "\xff\xfe"}]}\n# \xc3\x28\n', ctype)
        elif fault == "huge":
            writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n"
                         f"Content-Length: {HUGE_BODY_BYTES}\r\n\r\n".encode())
            for _ in range(HUGE_BODY_BYTES >> 16):
                writer.write(b" " * (1 << 16))
                await writer.drain()
        else:
            raise ValueError(f"unknown GET fault {fault!r}")
        await writer.drain()
        return True

    async def _route(self, method, path, headers, body, reader, writer) -> bool:
        """Answer one request; False closes the connection."""
        if method == "GET" and path in self.faults:
            return await self._get_fault(self.faults[path], path, reader, writer)
        if method == "GET" and path in self.replies:
            ctype = "application/json" if path.startswith("/v1/") else "text/plain"
            self._reply(writer, 200, self.replies[path], ctype)
            await writer.drain()
            return True
        if path == "/metrics":
            if not self.metrics:
                self._reply(writer, 404, b"Not Found", "text/plain")
            else:
                self._reply(writer, 200, self.metrics_text().encode(), "text/plain")
            await writer.drain()
            return True
        if self.mode == "notopenai" or not path.startswith("/v1/"):
            self._reply(writer, 404, b"<html><body>Not Found</body></html>", "text/html")
            await writer.drain()
            return True
        if self.api_key is not None:
            given = headers.get("authorization", "")
            if given != f"Bearer {self.api_key}":
                msg = {"error": {"message": f"Incorrect API key provided: {given[7:]}"}}
                self._reply(writer, 401, json.dumps(msg).encode())
                await writer.drain()
                return True
        if path == "/v1/models" and method == "GET":
            data = {"object": "list", "data": [{"id": self.model, "object": "model",
                                                "owned_by": "vllm"}]}
            self._reply(writer, 200, json.dumps(data).encode())
            await writer.drain()
            return True
        if path not in ("/v1/completions", "/v1/chat/completions") or method != "POST":
            self._reply(writer, 404, b'{"detail": "Not Found"}')
            await writer.drain()
            return True
        req = json.loads(body or b"{}")
        self.received_s.append(time.perf_counter())
        self.bodies.append(req)
        self.requests += 1
        return await self._complete(req, path.endswith("chat/completions"), reader, writer)

    async def _complete(self, req: dict, chat: bool, reader, writer) -> bool:
        prompt = json.dumps(req.get("messages")) if chat else str(req.get("prompt", ""))
        found = _MODE.search(prompt)
        mode = found.group(1) if found else self.mode
        n = int(req.get("max_tokens") or 16)
        if self.eos_after is not None and not req.get("ignore_eos") \
                and not req.get("min_tokens"):
            n = min(n, self.eos_after)
        if mode == "stall":  # say nothing until the client hangs up
            while await reader.read(4096):
                pass
            return False
        if mode in _CANNED:  # one whole reply, not a stream
            self._reply(writer, *_CANNED[mode])
            await writer.drain()
            return True
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        if mode == "garbage":
            self._chunk(writer, b"this is not an event stream\n\n")
            self._chunk(writer, b"")
            await writer.drain()
            return True
        self.running += 1
        self.peak_running = max(self.peak_running, self.running)
        try:
            return await self._stream(req, chat, mode, n, reader, writer)
        finally:
            self.running -= 1

    async def _stream(self, req, chat, mode, n, reader, writer) -> bool:
        if self.ttft_s:
            await asyncio.sleep(self.ttft_s)
        events = 0

        def event(obj: dict) -> None:
            nonlocal events
            self._event(writer, obj if self.edit_chunk is None
                        else self.edit_chunk(req, chat, events, obj))
            events += 1

        if chat:
            event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        for i in range(n):
            if mode == "reset" and i == 3:
                await writer.drain()
                self._reset(writer)
                return False
            if mode == "truncated" and i == 2:
                self._chunk(writer, b"")
                await writer.drain()
                return True
            if mode == "stallmid" and i == 2:
                await writer.drain()
                while await reader.read(4096):  # say nothing more until the client hangs up
                    pass
                return False
            if i == 2 and mode in ("nonutf8", "longline", "deepjson"):
                self._chunk(writer, {"nonutf8": b"data: {\"t\": \"\xff\xfe\"}\n\n",
                                     "longline": b"data: " + b"x" * LONG_LINE_BYTES,
                                     "deepjson": b"data: " + b"[" * DEEP + b"\n\n"}[mode])
                self._chunk(writer, b"")
                await writer.drain()
                return True
            if mode == "keepalive":
                self._chunk(writer, b"data:\n\n: ping\n\ndata: \n\ndata:\ndata:\n\n")
            piece = f"t{i} "
            finish = ("length" if n == int(req.get("max_tokens") or 16) else "stop") \
                if i == n - 1 else None
            choice = {"index": 0, "finish_reason": finish}
            choice.update({"delta": {"content": piece}} if chat else {"text": piece})
            event({"object": "text_completion", "choices": [choice]})
            self.generated_tokens += 1
            await writer.drain()
            if i < n - 1 and self.token_interval_s:
                await asyncio.sleep(self.token_interval_s)
        if self.usage and (req.get("stream_options") or {}).get("include_usage"):
            words = len(str(req.get("prompt", req.get("messages", ""))).split())
            event({"choices": [], "usage": {
                "prompt_tokens": words, "completion_tokens": n, "total_tokens": words + n}})
        if mode != "nodone":
            self._chunk(writer, b"data: [DONE]\n\n")
        self._chunk(writer, b"")
        await writer.drain()
        return True

    def _event(self, writer, obj: object) -> None:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self._chunk(writer, b"data: " + data + b"\n\n")

    @staticmethod
    def _chunk(writer, data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def metrics_text(self) -> str:
        label = f'{{model_name="{self.model}"}}'
        return "".join([
            "# TYPE vllm:num_requests_running gauge\n",
            f"vllm:num_requests_running{label} {self.running}\n",
            "# TYPE vllm:num_requests_waiting gauge\n",
            f"vllm:num_requests_waiting{label} 0\n",
            "# TYPE vllm:kv_cache_usage_perc gauge\n",
            f"vllm:kv_cache_usage_perc{label} {min(1.0, self.running / 100)}\n",
            "# TYPE vllm:generation_tokens counter\n",
            f"vllm:generation_tokens_total{label} {self.generated_tokens}\n",
        ])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--interval", type=float, default=0.005, help="seconds between tokens")
    p.add_argument("--metrics", action="store_true")
    args = p.parse_args(argv)
    server = FakeServer(token_interval_s=args.interval, metrics=args.metrics, port=args.port)
    ready = threading.Event()

    async def run():
        task = asyncio.ensure_future(server.serve(ready))
        while not ready.is_set():
            await asyncio.sleep(0.01)
        print(f"PORT {server.port}", flush=True)
        await task

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
