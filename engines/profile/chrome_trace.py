"""A torch.profiler Chrome trace, read as a stream.

`prof.export_chrome_trace(path)` writes one JSON document: either an object whose
`traceEvents` list holds the events (torch, vLLM's and SGLang's profilers, with `.gz` when they
compress it) or, in the Trace Event Format's other form, the bare list. A trace of a serving
run is hundreds of MB, so the events are parsed one at a time (ijson, its C backend where it is
installed) while the bytes read are reported, and only what the profile needs is kept: the
complete events (ph "X", times in µs) and the process and thread names (ph "M").

A file that is not a whole, well-typed trace raises `TraceReadError`, naming the file, the event
index and the field; nothing partial is returned.
"""

from __future__ import annotations

import gc
import gzip
import math
import os
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

import ijson
import numpy as np

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 1 << 18
PROGRESS_EVERY = 1 << 13  # events between two progress reports
WHITESPACE = b" \t\r\n"
MAX_DEPTH = 64
"""Nesting a trace never needs (torch's is 5 deep: the document, traceEvents, an event, its args,
"Input Dims"). Deeper is refused before the parser sees it: ijson keeps a path prefix per
level, so a file nested 100,000 deep would take O(depth²) memory, tens of GB."""
QUOTE, QUOTE_BYTE, BACKSLASH_BYTE = ord('"'), b'"', b"\\"
NOT_QUOTE_OR_BRACKET = bytes(sorted(set(range(256)) - set(b'"[]{}')))
STEP = np.zeros(256, np.int32)  # a byte's change of depth, outside strings
STEP[[ord("["), ord("{")]] = 1
STEP[[ord("]"), ord("}")]] = -1

NO_ARGS: Mapping = MappingProxyType({})  # shared by the events that record none
Progress = Callable[[float | None, str], None]


class TraceReadError(ValueError):
    """The file is not a whole, well-typed Chrome trace: `path`, the index of the event being
    read (None before the first one), the `field` at fault."""

    def __init__(self, path: str, index: int | None, field: str, problem: str) -> None:
        self.path, self.index, self.field, self.problem = path, index, field, problem
        where = f"event {index}" if index is not None else "trace"
        super().__init__(f"{path}: {where}: {field}: {problem}")


class TraceEvent(NamedTuple):
    """One complete event (ph "X"): a CPU op, a GPU kernel, a memcpy, an annotation."""

    name: str
    cat: str
    ts_us: float
    dur_us: float
    pid: int | str
    tid: int | str
    args: Mapping  # as recorded: "Input Dims", "Input type", "flops", "stream", ...

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


@dataclass(frozen=True)
class ChromeTrace:
    path: str
    bytes_read: int  # the file's bytes (compressed, for a .gz)
    events: tuple[TraceEvent, ...]
    process_names: Mapping[int | str, str]
    thread_names: Mapping[tuple[int | str, int | str], str]


class _CountingReader:
    """The file's bytes, counted as they are read (the progress of a .gz too)."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self.bytes_read = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.bytes_read += len(data)
        return data


class _Prefixed:
    """A stream whose first bytes were already read (to see the document's first character)."""

    def __init__(self, head: bytes, rest) -> None:
        self.head, self.rest = head, rest

    def read(self, n: int = -1) -> bytes:
        if self.head and n != 0:  # ijson reads 0 bytes to learn the stream's type
            data, self.head = self.head, b""
            return data
        return self.rest.read(n)


class _DepthGuard:
    """The decompressed text, passed on as read, refused once nested deeper than MAX_DEPTH.

    Brackets inside strings do not count. Per chunk, at C speed: escapes are dropped first (a
    pair of backslashes, then a backslash and the quote it escapes; an odd trailing backslash
    waits for the next chunk), then every byte but quotes and brackets, then every pair of
    adjacent quotes (a string holding no bracket: the parity of the quotes before each bracket
    is unchanged). What is left, a few per cent of the text, is scanned with numpy: a bracket
    counts where an even number of quotes precede it. Depth and the string state carry over."""

    def __init__(self, stream, fail: Callable[[str, str], None]) -> None:
        self.stream, self.fail = stream, fail
        self.depth = 0
        self.in_string = False
        self.backslash = b""  # an odd trailing backslash of the previous chunk

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        if data:
            self.scan(data)
        return data

    def scan(self, data: bytes) -> None:
        if self.backslash or BACKSLASH_BYTE in data:
            text = self.backslash + data
            run = len(text) - len(text.rstrip(BACKSLASH_BYTE))
            self.backslash = BACKSLASH_BYTE if run % 2 else b""
            text = text[:len(text) - run % 2].replace(b"\\\\", b"").replace(b'\\"', b"")
        else:
            text = data
        left = text.translate(None, NOT_QUOTE_OR_BRACKET).replace(b'""', b"")
        if not left:
            return
        a = np.frombuffer(left, np.uint8)
        step = STEP[a]
        if self.in_string or QUOTE_BYTE in left:
            inside = (np.cumsum(a == QUOTE, dtype=np.int32) + self.in_string) & 1
            step[inside.astype(bool)] = 0
            self.in_string = bool(inside[-1])
        depth = np.cumsum(step) + self.depth
        if depth.max() > MAX_DEPTH:
            self.fail("json", f"nested deeper than {MAX_DEPTH}")
        self.depth = int(depth[-1])


def read_chrome_trace(path: str | os.PathLike, progress: Progress | None = None) -> ChromeTrace:
    """Every complete event and name of the trace at `path` (.json or gzip, by its bytes);
    `progress(fraction of the file's bytes read, message)` every few thousand events."""
    name = os.fspath(path)
    total = os.path.getsize(name)
    with open(name, "rb") as raw_file:
        counted = _CountingReader(raw_file)
        is_gzip = raw_file.peek(2)[:2] == GZIP_MAGIC
        stream = gzip.GzipFile(fileobj=counted, mode="rb") if is_gzip else counted
        reader = _EventReader(name, total, counted, progress)
        collecting = gc.isenabled()
        gc.disable()  # a million new dicts, none garbage: each collection would walk them all
        try:
            reader.read(_DepthGuard(stream, reader.fail))
        except TraceReadError:
            raise
        except (ijson.JSONError, UnicodeDecodeError, EOFError, zlib.error, gzip.BadGzipFile,
                RecursionError) as exc:
            problem = "the file ends early" if isinstance(exc, EOFError) else str(exc).strip()
            field = "gzip" if is_gzip and not isinstance(exc, ijson.JSONError) else "json"
            raise TraceReadError(name, reader.index, field, problem.splitlines()[0]
                                 if problem else type(exc).__name__) from exc
        finally:
            if collecting:
                gc.enable()
    if progress is not None:
        progress(1.0, f"{len(reader.events):,} events")
    return ChromeTrace(name, counted.bytes_read, tuple(reader.events), reader.process_names,
                       reader.thread_names)


class _EventReader:
    def __init__(self, path: str, total: int, counted: _CountingReader,
                 progress: Progress | None) -> None:
        self.path, self.total, self.counted, self.progress = path, total, counted, progress
        self.index: int | None = None
        self.events: list[TraceEvent] = []
        self.process_names: dict = {}
        self.thread_names: dict = {}

    def read(self, stream) -> None:
        head = b""
        while True:
            chunk = stream.read(CHUNK_BYTES)
            head += chunk
            if not chunk or head.lstrip(WHITESPACE):
                break
        first = head.lstrip(WHITESPACE)[:1]
        if first == b"{":
            prefix = "traceEvents.item"
        elif first == b"[":
            prefix = "item"
        else:
            raise TraceReadError(self.path, None, "json",
                                 "empty file" if not first else
                                 "neither an object with traceEvents nor a list of events")
        items = ijson.items(_Prefixed(head, stream), prefix, use_float=True,
                            buf_size=CHUNK_BYTES)
        append, take, progress = self.events.append, self.take, self.progress
        count = 0
        try:
            for event in items:  # to the document's end: a cut anywhere raises
                # the common case, a well-typed complete event, checked inline
                if type(event) is dict and event.get("ph") == "X":
                    name, cat = event.get("name"), event.get("cat", "")
                    ts, dur = event.get("ts"), event.get("dur")
                    pid, tid = event.get("pid"), event.get("tid")
                    args = event.get("args", NO_ARGS)
                    if (type(name) is str and type(cat) is str and type(ts) is float
                            and type(dur) is float and -math.inf < ts < math.inf
                            and 0.0 <= dur < math.inf and (type(args) is dict or args is NO_ARGS)
                            and (type(pid) is int or type(pid) is str)
                            and (type(tid) is int or type(tid) is str)):
                        append(TraceEvent(name, cat, ts, dur, pid, tid, args))
                        count += 1
                        if progress is not None and count % PROGRESS_EVERY == 0:
                            self.report(count)
                        continue
                self.index = count
                take(event)  # anything else: names, or the named error
                count += 1
                if progress is not None and count % PROGRESS_EVERY == 0:
                    self.report(count)
        finally:
            self.index = count
        if self.index == 0 and prefix != "item":
            self.index = None
            self.check_events_list()

    def report(self, count: int) -> None:
        self.progress(self.counted.bytes_read / max(self.total, 1), f"{count:,} events")

    def check_events_list(self) -> None:
        """No event came: `traceEvents` must then be there, and an (empty) list."""
        with open(self.path, "rb") as raw:
            stream = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == GZIP_MAGIC else raw
            for prefix, kind, _ in ijson.parse(stream):
                if prefix == "traceEvents":
                    if kind != "start_array":
                        raise TraceReadError(self.path, None, "traceEvents",
                                             f"not a list ({kind})")
                    return
        raise TraceReadError(self.path, None, "traceEvents", "missing")

    def fail(self, field: str, problem: str):
        raise TraceReadError(self.path, self.index, field, problem)

    def take(self, event) -> None:
        if type(event) is not dict:
            self.fail("event", f"not an object ({type(event).__name__})")
        ph = event.get("ph")
        if ph == "X":
            self.events.append(TraceEvent(
                self.text(event, "name"), self.text(event, "cat", ""),
                self.number(event, "ts"), self.duration(event),
                self.ident(event, "pid"), self.ident(event, "tid"), self.args(event)))
        elif ph == "M":
            kind = event.get("name")
            if kind == "process_name":
                self.process_names[self.ident(event, "pid")] = self.label(event)
            elif kind == "thread_name":
                key = (self.ident(event, "pid"), self.ident(event, "tid"))
                self.thread_names[key] = self.label(event)
        elif type(ph) is not str:
            self.fail("ph", "missing" if ph is None else f"not a string ({ph!r:.40})")

    def text(self, event: dict, field: str, default: str | None = None) -> str:
        value = event.get(field, default)
        if type(value) is not str:
            self.fail(field, "missing" if value is None else f"not a string ({value!r:.40})")
        return value

    def number(self, event: dict, field: str) -> float:
        value = event.get(field)
        if type(value) is float:
            if math.isfinite(value):
                return value
        elif type(value) is int:
            try:
                return float(value)
            except OverflowError:
                pass
        elif value is None:
            self.fail(field, "missing")
        self.fail(field, f"not a finite number ({value!r:.40})")

    def duration(self, event: dict) -> float:
        dur = self.number(event, "dur")
        if dur < 0:
            self.fail("dur", f"negative ({dur!r})")
        return dur

    def ident(self, event: dict, field: str) -> int | str:
        value = event.get(field)
        if type(value) is int or type(value) is str:
            return value
        self.fail(field, "missing" if value is None else
                  f"not an integer or a string ({value!r:.40})")

    def args(self, event: dict) -> dict:
        args = event.get("args", {})
        if type(args) is not dict:
            self.fail("args", f"not an object ({args!r:.40})")
        return args

    def label(self, event: dict) -> str:
        args = self.args(event)
        value = args.get("name")
        if type(value) is not str:
            self.fail("args.name", "missing" if value is None else
                      f"not a string ({value!r:.40})")
        return value
