"""The wrong values a hostile server puts at a field, and how to put them there.

VALUES holds every JSON type and the values Python's parser reads that JSON does not mean:
NaN, Infinity, 1e400 (inf), a lone surrogate escape, nesting deeper than the parser goes.
`Raw` values are JSON text spliced in as they are; `put` sets one field of a decoded reply and
`dumps` writes it with the raw values spliced in.
"""

from __future__ import annotations

import copy
import json


class Raw(str):
    """JSON text to splice in as it is (json.dumps cannot write it)."""


VALUES: dict[str, object] = {
    "null": None, "true": True, "false": False,
    "zero": 0, "int": 7, "negative": -3, "fraction": 2.5, "whole float": 3.0,
    "huge int": 10 ** 30, "huge float": 1e308, "1e400": Raw("1e400"),
    "NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf"),
    "text": "x", "empty text": "", "long text": "y" * 100_000,
    "lone surrogate": Raw('"\\ud800"'),
    "list": [1, "a"], "empty list": [], "long list": [0] * 10_000,
    "object": {"a": 1}, "empty object": {},
    "nested list": json.loads("[" * 50 + "]" * 50),
    "too deep": Raw("[" * 5000 + "]" * 5000),
}
TEXT = {"text", "empty text", "long text"}
OBJECTS = {"object", "empty object"}
WHOLE = {"zero", "int", "whole float"}  # counts: whole numbers 0..1e9
FIRST_ITEM_WRONG = {"list": "a number", "long list": "a number", "nested list": "a list"}

_MARK = "\u0001raw:"


def parent_of(obj: object, path: tuple) -> object | None:
    """The container that holds `path`'s last step, or None where the path does not reach."""
    for step in path[:-1]:
        if isinstance(step, int):
            if not isinstance(obj, list) or len(obj) <= step:
                return None
        elif not isinstance(obj, dict) or step not in obj:
            return None
        obj = obj[step]
    last = path[-1]
    if isinstance(last, int):
        return obj if isinstance(obj, list) and len(obj) > last else None
    return obj if isinstance(obj, dict) else None


def put(obj: object, path: tuple, value: object) -> object:
    """A copy of `obj` with `value` at `path` (the whole of it for path ())."""
    if not path:
        return value
    out = copy.deepcopy(obj)
    parent_of(out, path)[path[-1]] = value
    return out


def dumps(obj: object) -> bytes:
    """JSON text of `obj`, Raw values spliced in."""
    raws: list[str] = []

    def mark(value):
        if isinstance(value, Raw):
            raws.append(str(value))
            return f"{_MARK}{len(raws) - 1}"
        if isinstance(value, dict):
            return {k: mark(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mark(v) for v in value]
        return value

    text = json.dumps(mark(obj))
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"{_MARK}{i}"), raw, 1)
    return text.encode()


def show(path: tuple) -> str:
    """A path as the client names it: ("choices", 0, "text") -> "choices[0].text"."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else ("." if out else "") + step
    return out
