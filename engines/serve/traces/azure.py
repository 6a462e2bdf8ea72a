"""Azure's LLM inference traces (2023 and 2024, code and conversation), CSV:

    TIMESTAMP,ContextTokens,GeneratedTokens
    2023-11-16 18:15:46.6805900,4808,10

TIMESTAMP is an absolute wall-clock time, "YYYY-MM-DD HH:MM:SS[.fraction]" (any number of
fraction digits; 'T' for the space and a trailing "Z" or "+HH:MM" / "-HH:MM" offset are
accepted too); arrival_s counts from the first row's time, kept exact to the fraction's
digits (days and seconds of the day are subtracted apart, never as one epoch float)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Iterator

from inferlab.engines.serve.traces.csv_header import csv_rows
from inferlab.engines.serve.traces.record import TraceError, TraceRequest, count_text, shown
from inferlab.engines.serve.workload import MAX_TOKENS

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_TIME = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):(\d\d(?:\.\d+)?)"
                   r"(Z|[+-]\d\d:\d\d)?")
_MINUTE = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):")


def _minute(prefix: str, minutes: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(day ordinal, seconds of the day at the minute) of "YYYY-MM-DD HH:MM:", cached."""
    m = _MINUTE.fullmatch(prefix)
    if m is None:
        raise ValueError(prefix)
    date, hh, mm = m.groups()
    if int(hh) > 23 or int(mm) > 59:
        raise ValueError(prefix)
    if len(minutes) > 100_000:  # a long trace: forget the old minutes
        minutes.clear()
    value = minutes[prefix] = (datetime.date.fromisoformat(date).toordinal(),
                               int(hh) * 3600 + int(mm) * 60)
    return value


def wall_seconds(text: str, minutes: dict[str, tuple[int, int]]) -> tuple[int, float]:
    """(day ordinal, seconds into that day, in UTC when an offset is given); ValueError for
    text that is not such a time. `minutes` caches the "YYYY-MM-DD HH:MM:" prefixes seen:
    the fast path parses only the seconds."""
    sec_text = text[17:]
    if (len(sec_text) >= 2 and sec_text[:2].isdigit()
            and (len(sec_text) == 2 or (sec_text[2] == "." and sec_text[3:].isdigit()))):
        prefix = text[:17]
        base = minutes.get(prefix) or _minute(prefix, minutes)
        sec = float(sec_text)
        if sec >= 61:
            raise ValueError(text)
        return base[0], base[1] + sec
    m = _TIME.fullmatch(text.strip())
    if m is None:
        raise ValueError(text)
    date, hh, mm, ss, zone = m.groups()
    day, sec = _minute(f"{date} {hh}:{mm}:", minutes)
    s = float(ss)
    if s >= 61:
        raise ValueError(text)
    sec += s
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        sec -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return day, sec


def rows(lines: Iterable[str], name: str) -> Iterator[tuple[int, TraceRequest]]:
    """(line number, request) for each data row; TraceError names line and field."""
    found = csv_rows(lines, name, COLUMNS)
    if found is None:
        return
    reader, (ti, ci, gi) = found
    minutes: dict[str, tuple[int, int]] = {}
    first: tuple[int, float] | None = None
    width = max(ti, ci, gi) + 1
    for row in reader:
        if len(row) < width:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            raise TraceError(f"{name} line {reader.line_num}: {len(row)} cells, the header "
                             f"names {width}")
        try:
            day, sec = wall_seconds(row[ti], minutes)
        except ValueError:
            raise TraceError(f"{name} line {reader.line_num}: field 'TIMESTAMP' must be a "
                             f"time YYYY-MM-DD HH:MM:SS.fraction, got {shown(row[ti])}"
                             ) from None
        if first is None:
            first = (day, sec)
        try:  # the common case inline; count_text names the field of a bad cell
            context, generated = int(row[ci]), int(row[gi])
            ok = 0 <= context <= MAX_TOKENS and 0 <= generated <= MAX_TOKENS
        except ValueError:
            ok = False
        if not ok:
            context = count_text(row[ci], name, reader.line_num, "ContextTokens")
            generated = count_text(row[gi], name, reader.line_num, "GeneratedTokens")
        yield reader.line_num, TraceRequest(
            (day - first[0]) * 86400 + (sec - first[1]), context, generated)
