"""Alibaba Bailian (Qwen) usage traces, JSON Lines (alibaba-edu/qwen-bailian-usagetraces-anon):

    {"chat_id": 160, "parent_chat_id": 159, "timestamp": 62.5, "input_length": 400,
     "output_length": 80, "type": "text", "turn": 2, "hash_ids": [1089, 1090, ...]}

timestamp in seconds; parent_chat_id is -1 for a conversation's first request; hash_ids name
16-token blocks (salted SipHash). A request's session is its conversation's root chat_id,
followed up the parent links seen so far (a parent not in the file: the parent's id); the
reader keeps one int per chat for that. Missing turn / parent_chat_id read as 1 / -1, as
AIPerf reads them; `type` and other keys are ignored."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from inferlab.engines.serve.traces.record import (
    TraceError,
    TraceRequest,
    block_ids,
    count,
    field,
    json_object,
    seconds,
    shown,
)

BLOCK_SIZE = 16
MAX_CHAT_ID = 2**63 - 1


def _chat_id(value, where: str, name: str, low: int) -> int:
    if type(value) is not int or not low <= value <= MAX_CHAT_ID:
        raise TraceError(f"{where}: field '{name}' must be an integer id ≥ {low}, "
                         f"got {shown(value)}")
    return value


def rows(lines: Iterable[str], name: str) -> Iterator[tuple[int, TraceRequest]]:
    """(line number, request) for each non-blank line; TraceError names line and field."""
    root: dict[int, int] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{name} line {number}"
        obj = json_object(text, where)
        chat = _chat_id(field(obj, "chat_id", where), where, "chat_id", 0)
        parent = _chat_id(obj.get("parent_chat_id", -1), where, "parent_chat_id", -1)
        turn = obj.get("turn", 1)
        if type(turn) is not int or not 1 <= turn <= 10**9:
            raise TraceError(f"{where}: field 'turn' must be an integer ≥ 1, got {shown(turn)}")
        session = chat if parent == -1 else root.get(parent, parent)
        root[chat] = session
        ids = block_ids(obj.get("hash_ids", []), where, "hash_ids")
        yield number, TraceRequest(
            seconds(field(obj, "timestamp", where), where, "timestamp"),
            count(field(obj, "input_length", where), where, "input_length"),
            count(field(obj, "output_length", where), where, "output_length"),
            ids, BLOCK_SIZE if ids else 0, session, turn)
