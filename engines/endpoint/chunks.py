"""One streamed chunk of a completion or a chat completion, read strictly.

`read_chunk(data, chat)` parses one SSE event's data and hands back only what the client uses
of it, every field checked first (engines/endpoint/fields.py): data that is not a JSON object
is `MalformedSSE`, a field of the wrong type or range a `FieldError` naming it. Read, absent
and null alike:

- `error`: an object (its `message` text) or text: the server failed mid-stream;
- `usage`: an object; `usage.prompt_tokens`, `usage.completion_tokens`: counts;
- `choices`: a list (empty: a usage-only chunk); `choices[0]`: an object;
  `choices[0].finish_reason`: text of at most MAX_FINISH_CHARS ("" reads as none);
- completions: `choices[0].text`: text;
- chat: `choices[0].delta`: an object; its `content`, `reasoning_content` and `role`: text.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from inferlab.engines.endpoint import fields
from inferlab.engines.endpoint.sse import MalformedSSE

MAX_FINISH_CHARS = 64
MAX_ERROR_CHARS = 160


class Chunk(NamedTuple):
    """What the client uses of one chunk (a tuple: one is made per streamed token)."""

    error: str | None = None                          # the server's message: it failed
    usage: tuple[int | None, int | None] | None = None  # (prompt, completion) tokens
    has_choice: bool = False
    piece: str = ""                                   # the text the choice carries
    finish: str | None = None
    role: bool = False                                # a chat delta that names the role


def parse(data: str) -> dict:
    """One event's data as a JSON object, or MalformedSSE."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        raise MalformedSSE(f"data is not JSON: {data[:60]!r}") from None
    if type(value) is not dict:
        raise MalformedSSE(f"data is not a JSON object: {data[:60]!r}")
    return value


def _error(err: object) -> str | None:
    if err is None:
        return None
    if type(err) is dict:
        message = fields.text(err.get("message"), "error.message")
        if message is None:
            message = json.dumps(err)
    elif type(err) is str:
        message = fields.text(err, "error")
    else:
        raise fields.FieldError("error", f"is {fields.describe(err)}, not an object or text")
    return message[:MAX_ERROR_CHARS] or "(no message)"


def _usage(value: object) -> tuple[int | None, int | None] | None:
    usage = fields.obj(value, "usage")
    if usage is None:
        return None
    return (fields.count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
            fields.count(usage.get("completion_tokens"), "usage.completion_tokens"))


def _text(value: object, path: str) -> str:
    """fields.text, "" for null; plain ASCII text (nearly every piece) checked inline."""
    if type(value) is str and value.isascii():
        return value
    return "" if value is None else fields.text(value, path)


def read_chunk(data: str, chat: bool) -> Chunk:
    """The fields the client uses of one event's data; MalformedSSE or FieldError."""
    obj = parse(data)
    error = obj.get("error")
    if error is not None:
        return Chunk(error=_error(error))
    usage = obj.get("usage")
    if usage is not None:
        usage = _usage(usage)
    choices = obj.get("choices")
    if type(choices) is not list:
        fields.items(choices, "choices")
        return Chunk(usage=usage)
    if not choices:
        return Chunk(usage=usage)
    choice = choices[0]
    if type(choice) is not dict:
        raise fields.FieldError("choices[0]", f"is {fields.describe(choice)}, not an object")
    finish = choice.get("finish_reason")
    if finish is not None:
        finish = fields.text(finish, "choices[0].finish_reason", MAX_FINISH_CHARS) or None
    if not chat:
        return Chunk(None, usage, True, _text(choice.get("text"), "choices[0].text"), finish)
    delta = choice.get("delta")
    if type(delta) is not dict:
        delta = fields.obj(delta, "choices[0].delta") or {}
    piece = _text(delta.get("content"), "choices[0].delta.content")
    reasoning = delta.get("reasoning_content")
    if reasoning is not None:
        piece += _text(reasoning, "choices[0].delta.reasoning_content")
    role = "role" in delta
    if role:
        _text(delta["role"], "choices[0].delta.role")
    return Chunk(None, usage, True, piece, finish, role)
