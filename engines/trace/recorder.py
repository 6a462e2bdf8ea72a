"""TraceRecorder: spans, counters and instants in Chrome Trace Event Format, from any thread.

Events are the dicts the format defines (`ph` X complete span, C counter, i instant, M
metadata). Timestamps are microseconds since the recorder was created, measured with one
clock (`time.perf_counter` unless a test injects another). Each thread that records gets a
small tid (1, 2, ... in order of its first event) and a `thread_name` M event, so Perfetto
and chrome://tracing show one named track per worker.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

PID = 1
DEFAULT_MAX_EVENTS = 500_000  # ~ a few hundred MB at most; None means unbounded
INSTANT_SCOPES = ("g", "p", "t")  # global, process, thread


class TraceRecorder:
    """Records trace events; thread-safe. `max_events` bounds memory by dropping the oldest."""

    def __init__(
        self,
        process_name: str = "InferLab",
        *,
        clock: Callable[[], float] = time.perf_counter,
        max_events: int | None = DEFAULT_MAX_EVENTS,
        pid: int = PID,
    ) -> None:
        if max_events is not None and max_events < 1:
            raise ValueError(f"max_events must be at least 1, got {max_events}")
        self.process_name = process_name
        self.pid = pid
        self.max_events = max_events
        self._clock = clock
        self._t0_s = clock()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._events: deque[dict] = deque(maxlen=max_events)
        self._thread_names: dict[int, str] = {}
        self._tracks: dict[str, int] = {}  # named tracks (add_span's `track`) -> tid
        self._dropped = 0

    @property
    def t0_s(self) -> float:
        """Clock reading (seconds) at creation: the zero of every `ts`."""
        return self._t0_s

    @property
    def dropped(self) -> int:
        """Events dropped because `max_events` was reached (since creation or `clear`)."""
        return self._dropped

    def now_s(self) -> float:
        """The recorder's clock, in seconds (absolute, like `time.perf_counter`)."""
        return self._clock()

    @contextmanager
    def span(self, name: str, cat: str = "", args: Mapping | None = None) -> Iterator[dict]:
        """Time the `with` body as one X event; yields its args dict, which the body may fill.

        A body that raises is still recorded, with the exception's type in `args["error"]`.
        """
        span_args = dict(args or {})
        start_s = self._clock()
        try:
            yield span_args
        except BaseException as exc:
            span_args["error"] = type(exc).__name__
            raise
        finally:
            self.add_span(name, start_s, self._clock(), cat=cat, args=span_args)

    def add_span(
        self,
        name: str,
        start_s: float,
        end_s: float,
        cat: str = "",
        args: Mapping | None = None,
        track: str | None = None,
    ) -> None:
        """An X event for a span measured elsewhere, in absolute clock seconds; on the
        calling thread's track, or on the named `track` (its own tid, named like a thread:
        e.g. one track per request, since Perfetto nests only the spans of one track)."""
        if end_s < start_s:
            raise ValueError(f"span {name!r} ends ({end_s}) before it starts ({start_s})")
        event = self._event(name, "X", start_s, cat, args, dur=_us(end_s - start_s))
        if track is not None:
            event["tid"] = self._track_tid(track)
        self._append(event)

    def counter(
        self,
        name: str,
        values: Mapping[str, float],
        ts_s: float | None = None,
        cat: str = "",
    ) -> None:
        """A C event: one sample of each named series (e.g. {"used": 3, "free": 5}).

        Non-finite values are left out (the format needs numbers); nothing left, no event.
        """
        finite = {str(k): float(v) for k, v in values.items() if math.isfinite(float(v))}
        if not finite:
            return
        when_s = self._clock() if ts_s is None else ts_s
        self._append(self._event(name, "C", when_s, cat, finite))

    def instant(
        self,
        name: str,
        args: Mapping | None = None,
        scope: str = "t",
        cat: str = "",
        ts_s: float | None = None,
    ) -> None:
        """An i event; `scope` is "t" (thread), "p" (process) or "g" (global)."""
        if scope not in INSTANT_SCOPES:
            raise ValueError(f"instant scope must be one of {INSTANT_SCOPES}, got {scope!r}")
        when_s = self._clock() if ts_s is None else ts_s
        self._append(self._event(name, "i", when_s, cat, args, s=scope))

    def events(self) -> list[dict]:
        """A copy of all events: M metadata first, then the rest by time.

        At equal `ts` a longer X span comes first, so parents precede their children.
        """
        with self._lock:
            recorded = [_copy(e) for e in self._events]
            thread_names = dict(self._thread_names)
        recorded.sort(key=lambda e: (e["ts"], -e.get("dur", 0.0)))
        return self._metadata(thread_names) + recorded

    def clear(self) -> None:
        """Forget recorded events and the drop count; keeps the clock zero and thread ids."""
        with self._lock:
            self._events.clear()
            self._dropped = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

    def _metadata(self, thread_names: dict[int, str]) -> list[dict]:
        def meta(kind: str, tid: int, name: str) -> dict:
            return {
                "name": kind,
                "ph": "M",
                "ts": 0.0,
                "pid": self.pid,
                "tid": tid,
                "args": {"name": name},
            }

        events = [meta("process_name", 0, self.process_name)]
        events += [meta("thread_name", tid, name) for tid, name in sorted(thread_names.items())]
        return events

    def _event(
        self, name: str, ph: str, when_s: float, cat: str, args: Mapping | None, **extra
    ) -> dict:
        event = {
            "name": name,
            "ph": ph,
            "ts": _us(when_s - self._t0_s),
            **extra,
            "pid": self.pid,
            "tid": self._tid(),
        }
        if cat:
            event["cat"] = cat
        if args is not None:
            event["args"] = dict(args)
        return event

    def _append(self, event: dict) -> None:
        with self._lock:
            if self.max_events is not None and len(self._events) == self.max_events:
                self._dropped += 1
            self._events.append(event)

    def _track_tid(self, track: str) -> int:
        with self._lock:
            tid = self._tracks.get(track)
            if tid is None:
                tid = self._tracks[track] = len(self._thread_names) + 1
                self._thread_names[tid] = track
        return tid

    def _tid(self) -> int:
        """This thread's tid, allocated on its first event; its current name is kept."""
        name = threading.current_thread().name
        tid = getattr(self._local, "tid", None)
        if tid is not None and self._thread_names.get(tid) == name:
            return tid
        with self._lock:
            if tid is None:
                tid = self._local.tid = len(self._thread_names) + 1
            self._thread_names[tid] = name
        return tid


def _copy(event: dict) -> dict:
    """An event with its own dict and args dict (values inside args are shared)."""
    copy = dict(event)
    if "args" in copy:
        copy["args"] = dict(copy["args"])
    return copy


def _us(seconds: float) -> float:
    """Seconds as microseconds, rounded to the nanosecond (keeps JSON short and exact)."""
    return round(seconds * 1e6, 3)
