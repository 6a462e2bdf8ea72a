"""InferLab's own JSON Lines traces (engines/serve/workload.py's format: arrival_s,
prompt_tokens or prompt_token_ids, output_tokens), read by the same line parser."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from inferlab.engines.serve.traces.record import TraceError, TraceRequest
from inferlab.engines.serve.workload import WorkloadError, parse_trace_line


def rows(lines: Iterable[str], name: str) -> Iterator[tuple[int, TraceRequest]]:
    """(line number, request) for each non-blank line; a bad line is a TraceError naming the
    line and field (workload.py's message)."""
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            w = parse_trace_line(text, f"{name} line {number}")
        except WorkloadError as e:
            raise TraceError(str(e)) from None
        yield number, TraceRequest(w.arrival_s, w.prompt_tokens, w.output_tokens,
                                   token_ids=w.prompt_token_ids)
