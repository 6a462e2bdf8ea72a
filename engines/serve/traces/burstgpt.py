"""BurstGPT (Azure OpenAI GPT usage at a campus), CSV:

    Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
    5,ChatGPT,472,18,490,Conversation log

Timestamp in seconds from the trace's start; Model "ChatGPT" or "GPT-4"; Log Type
"Conversation log" or "API log". `models` / `log_types` keep only the rows whose value is
one of them (exact, after stripping spaces). A failed request is logged with 0 response
tokens: the record keeps the 0. Total tokens is checked to be a count, not the sum."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

from inferlab.engines.serve.traces.csv_header import cells, csv_rows
from inferlab.engines.serve.traces.record import TraceRequest, count_text, seconds

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens",
           "Log Type")


def rows(lines: Iterable[str], name: str, models: Collection[str] | None = None,
         log_types: Collection[str] | None = None) -> Iterator[tuple[int, TraceRequest]]:
    """(line number, request) for each kept data row; TraceError names line and field."""
    found = csv_rows(lines, name, COLUMNS)
    if found is None:
        return
    reader, (ti, mi, qi, ri, si, li) = found
    width = max(ti, mi, qi, ri, si, li) + 1
    for number, row in cells(reader, name, width):
        where = f"{name} line {number}"
        if models is not None and row[mi].strip() not in models:
            continue
        if log_types is not None and row[li].strip() not in log_types:
            continue
        arrival = seconds(row[ti], where, "Timestamp", text=True)
        count_text(row[si], name, number, "Total tokens")
        yield number, TraceRequest(arrival, count_text(row[qi], name, number, "Request tokens"),
                                   count_text(row[ri], name, number, "Response tokens"))
