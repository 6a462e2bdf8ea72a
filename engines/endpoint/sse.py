"""An incremental Server-Sent Events decoder, strict enough to catch a server that is not one.

The byte stream arrives in pieces cut anywhere (inside a line, between CR and LF, inside a
UTF-8 character); `feed` returns the events completed so far and `close` the last one, so that
any cutting of the same bytes gives the same events. Lines end with CRLF, LF or CR. A line is a
field (`data:`, `event:`, `id:`, `retry:`, the value's one leading space dropped), a `:comment`
or blank (which dispatches the event: its data lines joined by newlines; an event with no data
line is dropped, as the WHATWG spec says).

The spec tells a browser to ignore an unknown field; an OpenAI-compatible stream never sends
one, so here it is `MalformedSSE`: an HTML error page or a JSON body sent with stream=true is
then a named failure, not a request that silently produced nothing. Lines and events are
bounded (MAX_LINE_BYTES, MAX_EVENT_BYTES), so garbage without newlines cannot grow memory.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_LINE_BYTES = 1 << 20
MAX_EVENT_BYTES = 4 << 20
_IGNORED_FIELDS = (b"id", b"retry")


class MalformedSSE(ValueError):
    """Bytes that are not a Server-Sent Events stream; the message says which line and why."""

    def __init__(self, why: str) -> None:
        super().__init__(f"malformed SSE: {why}")


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"


def _show(line: bytes) -> str:
    text = line[:40].decode("utf-8", "replace")
    return repr(text + ("..." if len(line) > 40 else ""))


class SSEDecoder:
    """Feed it bytes; it hands back complete events. One decoder per response."""

    def __init__(self) -> None:
        self._tail = b""          # an unterminated line (never holds CR, except a last one)
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        # Fast path, the usual piece from an OpenAI-compatible server: exactly one whole
        # "data: ...\n\n" event. Same result as the general path, a tenth of the cost.
        # (not after an "event:" line: the event it names would be lost)
        if not self._tail and not self._data and not self._event and chunk[:6] == b"data: " \
                and chunk[-2:] == b"\n\n" and chunk.count(b"\n") == 2 and b"\r" not in chunk \
                and len(chunk) <= MAX_LINE_BYTES:
            return [SSEEvent(self._text(chunk[6:-2]))]
        buf = self._tail + chunk
        hold = b""
        if buf.endswith(b"\r"):   # maybe the first half of CRLF: decide on the next piece
            buf, hold = buf[:-1], b"\r"
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, tail = buf.split(b"\n")
        if len(tail) > MAX_LINE_BYTES:
            raise MalformedSSE(f"a line of over {MAX_LINE_BYTES:,} bytes without a line end")
        self._tail = tail + hold
        events: list[SSEEvent] = []
        for line in lines:
            self._line(line, events)
        return events

    def close(self) -> list[SSEEvent]:
        """The events the end of the stream completes: a last unterminated line counts as a
        line, and pending data lines as an event (servers that omit the final blank line)."""
        events: list[SSEEvent] = []
        tail, self._tail = self._tail.rstrip(b"\r"), b""
        if tail:
            self._line(tail, events)
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                events.append(SSEEvent(self._text(b"\n".join(self._data)),
                                       self._text(self._event) or "message"))
            self._data, self._data_bytes, self._event = [], 0, b""
            return
        if line[:1] == b":":
            return
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data_bytes += len(value) + 1
            if self._data_bytes > MAX_EVENT_BYTES:
                raise MalformedSSE(f"an event of over {MAX_EVENT_BYTES:,} bytes")
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name not in _IGNORED_FIELDS:
            raise MalformedSSE(f"line {_show(line)} is not an SSE field "
                               "(data:, event:, id:, retry: or a :comment)")

    @staticmethod
    def _text(raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedSSE(f"not UTF-8 text (byte {e.start} of an event)") from None
