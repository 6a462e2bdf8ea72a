"""Which published format a trace file is, from its first non-blank line:

    [ ...                                       sharegpt (a JSON array of conversations)
    {"chat_id": ...}                            bailian
    {"timestamp": ..., "input_length": ...}     mooncake (with or without hash_ids)
    {"arrival_s": ...}                          inferlab (InferLab's own JSONL)
    {"conversations": ...}                      sharegpt (one conversation a line: refused,
                                                the reader takes vLLM's array)
    a CSV header with TIMESTAMP, ContextTokens, GeneratedTokens     azure
    a CSV header with Timestamp, Request tokens, Response tokens    burstgpt

Header names match whatever their case and spacing. A caller's `format` overrides this."""

from __future__ import annotations

import json

from inferlab.engines.serve.traces.record import TraceError, shown

FORMATS = ("mooncake", "bailian", "azure", "burstgpt", "sharegpt", "inferlab")


def detect_format(first_line: str, name: str) -> str:
    """The format of a file whose first non-blank line is `first_line`; TraceError when it
    is none of FORMATS."""
    text = first_line.strip().lstrip("\ufeff")
    if text.startswith("["):
        return "sharegpt"
    if text.startswith("{"):
        try:
            keys = set(json.loads(text))
        except (ValueError, TypeError, RecursionError):
            keys = set()
        if "chat_id" in keys:
            return "bailian"
        if "input_length" in keys and "timestamp" in keys:
            return "mooncake"
        if "arrival_s" in keys:
            return "inferlab"
    else:
        names = {cell.strip().casefold() for cell in text.split(",")}
        if {"timestamp", "contexttokens", "generatedtokens"} <= names:
            return "azure"
        if {"timestamp", "request tokens", "response tokens"} <= names:
            return "burstgpt"
    raise TraceError(f"{name} line 1: cannot tell the trace's format from {shown(text)}; "
                     f"name it (one of {', '.join(FORMATS)})")
