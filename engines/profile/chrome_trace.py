"""A torch.profiler Chrome trace, read as a stream.

`prof.export_chrome_trace(path)` writes one JSON document: either an object whose
`traceEvents` list holds the events (torch, vLLM's and SGLang's profilers, with `.gz` when they
compress it) or, in the Trace Event Format's other form, the bare list. A trace of a serving
run is hundreds of MB, so it is read a chunk at a time: `json_split.EventSplitter` cuts each
chunk's text at the event list's own commas, and each run of whole events is parsed in one
call by msgspec (C speed), while the bytes read are reported. Only what the profile needs is
kept: the complete events (ph "X", times in µs) and the process and thread names (ph "M").

A file that is not a whole, well-typed trace raises `TraceReadError`, naming the file, the event
index and the field; nothing partial is returned.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, NamedTuple

import msgspec

from inferlab.engines.gc_pause import gc_paused
from inferlab.engines.profile.json_split import WHITESPACE, EventSplitter, Run

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 1 << 20
MAX_DEPTH = 64
"""Nesting a trace never needs (torch's is 5 deep: the document, traceEvents, an event, its args,
"Input Dims"). Deeper is refused before the parser sees it."""
DECODE = msgspec.json.Decoder().decode
ELEMENT_PATH = re.compile(r"`\$\[(\d+)\](?:\.(\w+))?")
MISSING_FIELD = re.compile(r"missing required field `(\w+)`")
BYTE_OFFSET = re.compile(r"\(byte (\d+)\)")

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


class RawEvent(msgspec.Struct, gc=False):
    """Any event as parsed, typed by msgspec as it parses (a wrong type is refused there,
    naming the event and field): what each kind needs is checked after."""

    ph: str
    name: str | None = None
    cat: str = ""
    ts: float | None = None  # msgspec refuses a number out of float's range
    dur: Annotated[float, msgspec.Meta(ge=0.0)] | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    args: dict = {}


X_FIELDS = ("name", "ts", "dur", "pid", "tid")
"""A complete event's required fields."""
DECODE_EVENTS = msgspec.json.Decoder(list[RawEvent]).decode


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


def read_chrome_trace(path: str | os.PathLike, progress: Progress | None = None) -> ChromeTrace:
    """Every complete event and name of the trace at `path` (.json or gzip, by its bytes);
    `progress(fraction of the file's bytes read, message)` after each chunk."""
    name = os.fspath(path)
    total = os.path.getsize(name)
    with open(name, "rb") as raw_file:
        counted = _CountingReader(raw_file)
        is_gzip = raw_file.peek(2)[:2] == GZIP_MAGIC
        stream = gzip.GzipFile(fileobj=counted, mode="rb") if is_gzip else counted
        reader = _EventReader(name, total, counted, progress)
        try:
            with gc_paused():  # a million new events, none garbage
                reader.read(stream)
        except TraceReadError:
            raise
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            problem = "the file ends early" if isinstance(exc, EOFError) else str(exc).strip()
            raise TraceReadError(name, reader.index, "gzip", problem.splitlines()[0]
                                 if problem else type(exc).__name__) from exc
    if progress is not None:
        progress(1.0, f"{len(reader.events):,} events")
    return ChromeTrace(name, counted.bytes_read, tuple(reader.events), reader.process_names,
                       reader.thread_names)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _EventReader:
    def __init__(self, path: str, total: int, counted: _CountingReader,
                 progress: Progress | None) -> None:
        self.path, self.total, self.counted, self.progress = path, total, counted, progress
        self.index: int | None = None
        self.count = 0  # elements of the event list taken so far
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
        if first not in (b"{", b"["):
            raise TraceReadError(self.path, None, "json",
                                 "empty file" if not first else
                                 "neither an object with traceEvents nor a list of events")
        bare_list = first == b"["
        splitter = EventSplitter(MAX_DEPTH, self.fail, bare_list)
        chunk = head
        while chunk:
            for run in splitter.feed(chunk):
                self.take_run(run)
            if self.progress is not None:
                self.report(self.count)
            chunk = stream.read(CHUNK_BYTES)
        self.check_skeleton(splitter.finish(), bare_list)

    def take_run(self, run: Run) -> None:
        """The run's elements parsed and typed in one call (`RawEvent`), then kept."""
        base = self.count
        try:
            events = DECODE_EVENTS(b"[" + run.text + b"]")
        except msgspec.ValidationError as exc:  # "Expected ... - at `$[i].field`"
            at = ELEMENT_PATH.search(str(exc))
            missing = MISSING_FIELD.search(str(exc))
            self.index = base + int(at.group(1)) if at else base
            field = (at and at.group(2)) or (missing and missing.group(1)) or (
                "event" if at else "json")
            self.fail(field, _first_line(exc).split(" - at ")[0])
        except msgspec.DecodeError as exc:  # "... (byte N)" of the bracketed run
            at = BYTE_OFFSET.search(str(exc))
            self.index = base + (run.element_at(int(at.group(1)) - 1) if at else 0)
            self.fail("json", _first_line(exc))
        append = self.events.append
        for count, e in enumerate(events, base):
            if e.ph == "X":
                if (e.name is None or e.ts is None or e.dur is None or e.pid is None
                        or e.tid is None):
                    self.index = count
                    self.fail(next(f for f in X_FIELDS if getattr(e, f) is None), "missing")
                append(TraceEvent(e.name, e.cat, e.ts, e.dur, e.pid, e.tid, e.args))
            elif e.ph == "M":
                self.index = count
                self.take_name(e)
        self.count = base + len(events)
        self.index = self.count

    def check_skeleton(self, skeleton: bytes, bare_list: bool) -> None:
        """The document outside its event list must parse too; an object must hold the list
        under "traceEvents"."""
        self.index = None
        try:
            doc = DECODE(skeleton)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            self.fail("json", _first_line(exc))
        if bare_list:
            return
        if "traceEvents" not in doc:
            self.fail("traceEvents", "missing")
        if type(doc["traceEvents"]) is not list:
            self.fail("traceEvents", f"not a list ({type(doc['traceEvents']).__name__})")

    def report(self, count: int) -> None:
        self.progress(self.counted.bytes_read / max(self.total, 1), f"{count:,} events")

    def fail(self, field: str, problem: str):
        raise TraceReadError(self.path, self.index, field, problem)

    def take_name(self, e: RawEvent) -> None:
        if e.name == "process_name":
            self.process_names[self.ident(e, "pid")] = self.label(e)
        elif e.name == "thread_name":
            self.thread_names[(self.ident(e, "pid"), self.ident(e, "tid"))] = self.label(e)

    def ident(self, e: RawEvent, field: str) -> int | str:
        value = getattr(e, field)
        if value is None:
            self.fail(field, "missing")
        return value

    def label(self, e: RawEvent) -> str:
        value = e.args.get("name")
        if type(value) is not str:
            self.fail("args.name", "missing" if value is None else
                      f"not a string ({value!r:.40})")
        return value
