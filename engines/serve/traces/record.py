"""`TraceRequest`: one request of a published trace, whatever its format, and its errors.

    arrival_s       seconds from the trace's first arrival (after window and time scale)
    input_tokens    prompt length, tokens (≥ 0: a trace may log an empty one)
    output_tokens   generated length, tokens (≥ 0: BurstGPT logs failures as 0)
    block_hashes    ids of the prompt's consecutive blocks of block_size tokens (Mooncake:
                    512, Bailian: 16); equal ids mean equal content; () when the trace has none
    block_size      tokens per hashed block (0 when block_hashes is empty)
    session, turn   a conversation's id and the request's turn in it (Bailian), or None
    token_ids       the prompt's own ids when the trace gives them (InferLab JSONL), or None

`content.workload_request(record, vocab_size, index)` turns it into the batching engine's
`WorkloadRequest`. The checks every reader shares (`count`, `seconds`, `block_ids`,
`json_object`, `field`) raise TraceError naming the file, the line and the field.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from inferlab.engines.serve.workload import MAX_TOKENS, WorkloadError


class TraceError(WorkloadError):
    """A trace row that cannot be used: "<file> line <n>: field '<name>' ..."."""


class TraceRequest(NamedTuple):
    """Immutable; a NamedTuple rather than a frozen dataclass because a reader builds a
    million a second and a tuple builds in a fraction of the time."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    block_hashes: tuple[int, ...] = ()
    block_size: int = 0
    session: int | None = None
    turn: int | None = None
    token_ids: tuple[int, ...] | None = None



MAX_ARRIVAL_S = 1e10
"""A timestamp further than this from the trace's zero (~317 years) is a mistake."""
MAX_BLOCK_ID = 2**63 - 1


def shown(value) -> str:
    """A value for an error message, cut short."""
    try:
        text = repr(value)
    except ValueError:  # an integer over Python's int-to-text digit limit
        return "an integer of thousands of digits"
    return text if len(text) <= 40 else text[:37] + "..."


def count(value, where: str, name: str) -> int:
    """A token count read from JSON: an int in 0..MAX_TOKENS (bools refused)."""
    if type(value) is not int:
        raise TraceError(f"{where}: field '{name}' must be an integer token count, "
                         f"got {shown(value)}")
    if not 0 <= value <= MAX_TOKENS:
        raise TraceError(f"{where}: field '{name}' must be in 0..{MAX_TOKENS:,}, "
                         f"got {shown(value)}")
    return value


def count_text(text: str, file: str, line: int, name: str) -> int:
    """A token count read from a CSV cell: decimal digits, 0..MAX_TOKENS."""
    try:
        value = int(text)
    except ValueError:
        raise TraceError(f"{file} line {line}: field '{name}' must be an integer token "
                         f"count, got {shown(text)}") from None
    if not 0 <= value <= MAX_TOKENS:
        raise TraceError(f"{file} line {line}: field '{name}' must be in "
                         f"0..{MAX_TOKENS:,}, got {shown(text)}")
    return value


def seconds(value, where: str, name: str, per_s: float = 1.0, text: bool = False) -> float:
    """A timestamp (a JSON number, or with `text` a CSV cell's text) in its unit, as
    seconds: value / per_s, finite and within ±MAX_ARRIVAL_S."""
    try:
        if text and isinstance(value, str):
            value = float(value)
        elif type(value) not in (int, float):
            raise TypeError
        t = value / per_s
    except (TypeError, ValueError, OverflowError):
        raise TraceError(f"{where}: field '{name}' must be a number, got {shown(value)}"
                         ) from None
    if not -MAX_ARRIVAL_S <= t <= MAX_ARRIVAL_S:  # NaN fails both
        raise TraceError(f"{where}: field '{name}' must be a finite time within "
                         f"{MAX_ARRIVAL_S:g} s, got {shown(value)}")
    return t


def block_ids(value, where: str, name: str) -> tuple[int, ...]:
    """A list of block hash ids: ints in 0..2**63-1, at most MAX_TOKENS of them."""
    if not isinstance(value, list):
        raise TraceError(f"{where}: field '{name}' must be a list of block ids, "
                         f"got {shown(value)}")
    if len(value) > MAX_TOKENS:
        raise TraceError(f"{where}: field '{name}' holds {len(value):,} ids, over "
                         f"{MAX_TOKENS:,}")
    for i, v in enumerate(value):
        if type(v) is not int or not 0 <= v <= MAX_BLOCK_ID:
            raise TraceError(f"{where}: field '{name}' item {i} must be a block id in "
                             f"0..2**63-1, got {shown(v)}")
    return tuple(value)


def json_object(text: str, where: str) -> dict:
    """One JSON Lines line as an object; NaN, Infinity, 1e999 and huge integers refused."""
    try:
        obj = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise TraceError(f"{where}: nested too deeply") from None
    except json.JSONDecodeError as e:
        raise TraceError(f"{where}: not valid JSON at column {e.colno} ({e.msg})") from None
    except ValueError as e:  # NaN/Infinity, an integer of thousands of digits
        raise TraceError(f"{where}: not valid JSON ({str(e).split(';')[0]})") from None
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _no_constant(token: str):
    raise ValueError(f"{token} is not a number JSON allows")


def field(obj: dict, key: str, where: str):
    """obj[key], or TraceError naming the missing field."""
    try:
        return obj[key]
    except KeyError:
        raise TraceError(f"{where}: missing field '{key}'") from None
