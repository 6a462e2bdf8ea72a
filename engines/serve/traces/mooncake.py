"""Mooncake (Kimi, FAST'25) JSON Lines: one request a line,

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

timestamp in milliseconds from the trace's start; hash_ids name the prompt's 512-token
blocks, each id standing for its whole prefix. Other keys are ignored."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from inferlab.engines.serve.traces.record import (
    TraceRequest,
    block_ids,
    count,
    field,
    json_object,
    seconds,
)

BLOCK_SIZE = 512


def rows(lines: Iterable[str], name: str) -> Iterator[tuple[int, TraceRequest]]:
    """(line number, request) for each non-blank line; TraceError names line and field."""
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{name} line {number}"
        obj = json_object(text, where)
        ids = block_ids(obj.get("hash_ids", []), where, "hash_ids")
        yield number, TraceRequest(
            seconds(field(obj, "timestamp", where), where, "timestamp", per_s=1000.0),
            count(field(obj, "input_length", where), where, "input_length"),
            count(field(obj, "output_length", where), where, "output_length"),
            ids, BLOCK_SIZE if ids else 0)
