"""Strict reads of the JSON a server sends: every field checked (type, finiteness, range)
before use, a wrong one a `FieldError` that names it: "`choices[0].text` is a number, not
text".

JSON as Python's parser reads it is wider than JSON: NaN, Infinity and -Infinity are accepted,
1e400 becomes inf, and a "\\ud800" escape becomes a lone surrogate that no UTF-8 writer (a
snapshot, the screen) takes. Each reader refuses those where they do not belong. A field that
is absent and one that is null read alike (None): servers differ on which they send.
"""

from __future__ import annotations

import math

from inferlab.engines.fields import is_unicode

MAX_COUNT = 1_000_000_000   # a token count above this is no server's answer


class FieldError(ValueError):
    """A field of a server's JSON with the wrong type or an impossible value."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"`{path}` {why}" if path else f"the top level {why}")
        self.path = path


def describe(value: object) -> str:
    """How a JSON value reads in a message: 'a number', 'text', 'null', 'NaN', ..."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def show_number(value: int | float) -> str:
    """A number short enough for a message (a 400-digit integer is 'a 400-digit number')."""
    if isinstance(value, int):
        if abs(value) < 10 ** 15:
            return str(value)
        try:
            return f"a {len(str(abs(value)))}-digit number"
        except ValueError:  # past Python's int-to-text limit (json.loads stops there too)
            return "a number of thousands of digits"
    return f"{value:.6g}"




def text(value: object, path: str, max_chars: int | None = None) -> str | None:
    """`value` as text (None for null); FieldError for another type, a lone surrogate, or
    more than `max_chars` characters."""
    if value is None:
        return None
    if type(value) is not str:
        raise FieldError(path, f"is {describe(value)}, not text")
    if max_chars is not None and len(value) > max_chars:
        raise FieldError(path, f"is text of {len(value):,} characters, not at most "
                               f"{max_chars:,}")
    if not is_unicode(value):
        raise FieldError(path, "is text with a lone surrogate, not Unicode")
    return value


def obj(value: object, path: str) -> dict | None:
    """`value` as an object (None for null); FieldError for another type."""
    if value is None or type(value) is dict:
        return value
    raise FieldError(path, f"is {describe(value)}, not an object")


def items(value: object, path: str) -> list | None:
    """`value` as a list (None for null); FieldError for another type."""
    if value is None or type(value) is list:
        return value
    raise FieldError(path, f"is {describe(value)}, not a list")


def count(value: object, path: str, maximum: int = MAX_COUNT) -> int | None:
    """`value` as a whole number 0..maximum (None for null); 3.0 reads as 3. FieldError for
    another type, a fraction, a negative or huge number, NaN or an infinity."""
    if value is None:
        return None
    if value is True or value is False or not isinstance(value, int | float):
        raise FieldError(path, f"is {describe(value)}, not a count")
    if isinstance(value, float) and not math.isfinite(value):
        raise FieldError(path, f"is {describe(value)}, not a count")
    if isinstance(value, float) and not value.is_integer():
        raise FieldError(path, f"is {show_number(value)}, not a whole number")
    if not 0 <= value <= maximum:
        raise FieldError(path, f"is {show_number(value)}, not a count from 0 to {maximum:,}")
    return int(value)
