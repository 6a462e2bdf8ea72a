"""Read a trace file of any published format as TraceRequests, streamed: one row in memory
at a time (a `sample` keeps its N), whatever the file's size.

    read_trace(path, format=None, window=(start_s, end_s), time_scale=s, sample=N, seed=0)

Rows must come in arrival order: a timestamp earlier than the row before it is a TraceError
naming its line (the published traces are sorted; a file that is not is refused, not
re-sorted, so that a window can stop reading at its end). Then, with t0 the first arrival
the reader yields (after BurstGPT's model / log-type filter, before any window):

    kept        start_s ≤ t − t0 < end_s  (reading stops at the first row past end_s)
    arrival_s   (t − t0 − start_s) × time_scale   (time_scale 2: gaps twice as long)
    sample=N    N of the kept rows, uniformly (reservoir sampling, seeded), in arrival order

BurstGPT rows can be kept by model and log type first (`models`, `log_types`).
`progress(fraction of the file's bytes read, rows read)` is called every PROGRESS_ROWS rows.
ShareGPT's token counts come from `tokenizer` when one is given (sharegpt.py)."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from inferlab.engines.serve.traces import (
    azure,
    bailian,
    burstgpt,
    inferlab_jsonl,
    mooncake,
    sharegpt,
)
from inferlab.engines.serve.traces.detect import FORMATS, detect_format
from inferlab.engines.serve.traces.record import TraceError, TraceRequest
from inferlab.engines.serve.traces.window import is_window

TIME_FIELD = {"mooncake": "timestamp", "bailian": "timestamp", "azure": "TIMESTAMP",
              "burstgpt": "Timestamp", "sharegpt": "arrival", "inferlab": "arrival_s"}
MAX_SAMPLE = 10_000_000
PROGRESS_ROWS = 8192
Progress = Callable[[float, int], None]


def trace_format(path: str | os.PathLike, format: str | None = None) -> str:
    """`format` checked, or the format `detect_format` reads from the file's first
    non-blank line (an empty file: "inferlab", which then holds no request)."""
    name = Path(path).name
    if format is not None:
        if format not in FORMATS:
            raise TraceError(f"{name}: trace format must be one of {', '.join(FORMATS)}, "
                             f"got {format!r}")
        return format
    try:
        with open(path, encoding="utf-8", newline="") as f:
            for line in f:
                if line.strip():
                    return detect_format(line[:100_000], name)
    except UnicodeDecodeError as e:
        raise TraceError(f"{name}: not UTF-8 text (byte {e.start} of a chunk)") from None
    except OSError as e:
        raise TraceError(f"{name}: cannot read ({e.strerror or e})") from None
    return "inferlab"


def _check_options(window, time_scale, sample) -> tuple[float, float]:
    start_s, end_s = (0.0, math.inf) if window is None else (float(window[0]),
                                                              float(window[1]))
    if not is_window(start_s, end_s):
        raise TraceError(f"window must be 0 ≤ start < end seconds, got {window!r}")
    if not (isinstance(time_scale, (int, float)) and 0 < time_scale < math.inf):
        raise TraceError(f"time_scale must be a finite number > 0, got {time_scale!r}")
    if sample is not None and (type(sample) is not int or not 1 <= sample <= MAX_SAMPLE):
        raise TraceError(f"sample must be an integer in 1..{MAX_SAMPLE:,}, got {sample!r}")
    return start_s, end_s


def read_trace(path: str | os.PathLike, format: str | None = None, *,
               window: tuple[float, float] | None = None, time_scale: float = 1.0,
               sample: int | None = None, seed: int = 0,
               models: Collection[str] | None = None,
               log_types: Collection[str] | None = None,
               progress: Progress | None = None, tokenizer=None) -> Iterator[TraceRequest]:
    """The file's requests (module doc), lazily; each bad row a TraceError naming the file,
    its line and the field."""
    start_s, end_s = _check_options(window, time_scale, sample)
    fmt = trace_format(path, format)
    name = Path(path).name
    field = TIME_FIELD[fmt]
    kept = _windowed(path, fmt, name, field, start_s, end_s, float(time_scale),
                     models, log_types, progress, tokenizer)
    if sample is None:
        yield from kept
        return
    rng = random.Random(seed)
    reservoir: list[tuple[int, TraceRequest]] = []
    for i, r in enumerate(kept):
        if i < sample:
            reservoir.append((i, r))
        else:
            j = rng.randrange(i + 1)
            if j < sample:
                reservoir[j] = (i, r)
    reservoir.sort(key=lambda item: item[0])
    for _, r in reservoir:
        yield r


def _windowed(path, fmt, name, field, start_s, end_s, time_scale, models, log_types,
              progress, tokenizer) -> Iterator[TraceRequest]:
    try:
        size = max(os.path.getsize(path), 1)
        with open(path, encoding="utf-8", newline="") as f:
            if fmt == "sharegpt":
                rows = sharegpt.rows(f, name, tokenizer)
            elif fmt == "burstgpt":
                rows = burstgpt.rows(f, name, models, log_types)
            else:
                rows = {"mooncake": mooncake, "bailian": bailian, "azure": azure,
                        "inferlab": inferlab_jsonl}[fmt].rows(f, name)
            t0 = prev = None
            for n, (line, r) in enumerate(rows, 1):
                if progress is not None and n % PROGRESS_ROWS == 0:
                    progress(min(f.buffer.tell() / size, 1.0), n)  # the bytes decoded so far
                t = r.arrival_s
                if prev is not None and t < prev:
                    raise TraceError(f"{name} line {line}: field '{field}' goes back in time "
                                     f"({t:g} s after {prev:g} s on an earlier row); a trace "
                                     "is read in arrival order")
                prev = t
                if t0 is None:
                    t0 = t
                rel = t - t0
                if rel < start_s:
                    continue
                if rel >= end_s:
                    return
                arrival = (rel - start_s) * time_scale
                yield r if arrival == t else TraceRequest(
                    arrival, r.input_tokens, r.output_tokens, r.block_hashes, r.block_size,
                    r.session, r.turn, r.token_ids)
    except UnicodeDecodeError as e:
        raise TraceError(f"{name}: not UTF-8 text (byte {e.start} of a chunk)") from None
    except OSError as e:
        raise TraceError(f"{name}: cannot read ({e.strerror or e})") from None
