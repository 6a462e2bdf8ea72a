"""Strict field readers: every value read from outside (a lab's settings, a snapshot's
sections, a trace's rows) is checked field by field here. The lab's inputs, remembered
settings and a snapshot's `labs.<id>.settings` all go through the same `Setting` table.

`check_settings` is strict (ValueError naming the field and the accepted range: snapshot
reading); `clean_settings` keeps what is valid and puts the default back for the rest
(settings remembered from an older InferLab, hand-edited files).

The rest of a snapshot section (metrics, records, results) is read with the same checks:
`read_fields` reads an object field by field with a table of readers (a `Setting`, which is
callable, or any `reader(value, where) -> value`), `read_list` and `read_map` read lists and
name -> value objects with a reader per item, `read_tuple` a row of fixed length ([low,
high]), `read_dataclass` builds a record whose fields are read by their annotations,
`read_int_array` checks a long list of integers at numpy's speed, and `named` prefixes an
error raised by a record's own constructor with the field it was read from.

A frozen record checks its own fields when it is built (`check_fields` in its __post_init__),
with the same readers and a few more that also take what an engine hands out (numpy numbers,
tuples): `read_count`, `read_float` (`read_seconds`, `read_probability`), `read_floats`,
`read_name`, `read_names`; `as_tuple` and `or_none` adapt any reader to a record's tuple or a null.

A section reader checks every field its lab's view draws, so a view never meets a value of
the wrong kind, a non-finite number or a count past its range. Every refusal is one
ValueError "<where>: expected ..., got ..." whose <where> is the field's path
(labs.batching.metrics.ttft_s.p50), what the window's banner shows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

Reader = Callable[[Any, str], Any]
"""reader(value, where) -> the value read, or ValueError("<where>: ...")."""

INT_LIMIT = 2**63
"""Integers are refused at or past ±2**63: what numpy holds, and far past any count."""


@dataclass(frozen=True)
class Setting:
    """One field: its kind, and a closed range (numbers) or the values allowed.

    Kinds: "int", "float", "str", "bool", "str-list" (names), "int-list" and "float-list"
    (numbers in the range). `none`: null is accepted too (read as None). `max_len`: the
    longest text, or the most items of a list. A Setting is a reader: `setting(value, where)`
    is `setting.check(value, where)`."""

    kind: str
    low: float | None = None
    high: float | None = None
    choices: tuple | Callable[[], Any] | None = None  # a callable: asked when checking
    none: bool = False
    max_len: int | None = None

    def __call__(self, value, where: str):
        return self.check(value, where)

    def check(self, value, where: str):
        """`value` if it is acceptable, else ValueError("<where>: expected ..., got ...")."""
        if value is None and self.none:
            return None
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{where}: expected true or false, got {shown(value)}")
            return value
        if self.kind in ("int", "float"):
            return self._check_number(value, where)
        if self.kind in ("int-list", "float-list"):
            value = self._check_list(value, where, "numbers")
            if _plain_numbers(value, self.kind == "int-list", self.low, self.high):
                return list(value)
            item = Setting(self.kind[:-5], self.low, self.high)
            return [item.check(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if self.kind == "str-list":
            value = self._check_list(value, where, "names")
            if self.choices is None and set(map(type, value)) <= {str} \
                    and "".join(value).isascii():  # plain text: nothing to look at
                return list(value)
            if not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}: expected a list of names, got {shown(value)}")
            for v in value:
                _check_unicode(v, where)
                self._check_choice(v, where)
            return list(value)
        if not isinstance(value, str):
            what = "a name (text)" if self.choices is not None else "text"
            raise ValueError(f"{where}: expected {what}, got {shown(value)}")
        if self.max_len is not None and len(value) > self.max_len:
            raise ValueError(f"{where}: expected text of at most {self.max_len:,} characters, "
                             f"got {len(value):,}")
        _check_unicode(value, where)
        self._check_choice(value, where)
        return value

    def _check_number(self, value, where: str):
        ok = isinstance(value, int) if self.kind == "int" else isinstance(value, int | float)
        if isinstance(value, bool) or not ok:
            raise ValueError(f"{where}: expected {self._range_text()}, got {shown(value)}")
        if isinstance(value, int):  # exact: a huge integer converts to no float
            if not -INT_LIMIT < value < INT_LIMIT:
                raise ValueError(f"{where}: expected {self._range_text()}, got "
                                 f"{shown(value)}")
        elif not math.isfinite(value):
            raise ValueError(f"{where}: expected {self._range_text()}, got {value!r}")
        if (self.low is not None and value < self.low) or \
                (self.high is not None and value > self.high):
            raise ValueError(f"{where}: expected {self._range_text()}, got {shown(value)}")
        return value

    def _check_list(self, value, where: str, what: str) -> list:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list of {what}, got {shown(value)}")
        if self.max_len is not None and len(value) > self.max_len:
            raise ValueError(f"{where}: expected a list of at most {self.max_len:,} {what}, "
                             f"got {len(value):,}")
        return value

    def _check_choice(self, value: str, where: str) -> None:
        if self.choices is None:
            return
        allowed = tuple(self.choices() if callable(self.choices) else self.choices)
        if value not in allowed:
            raise ValueError(f"{where}: expected one of {', '.join(map(str, allowed))}, "
                             f"got {shown(value)}")

    def _range_text(self) -> str:
        noun = "an integer" if self.kind.startswith("int") else "a finite number"
        if self.low is not None and self.high is not None:
            return f"{noun} in {_number(self.low)}..{_number(self.high)}"
        if self.low is not None:
            return f"{noun} >= {_number(self.low)}"
        if self.high is not None:
            return f"{noun} <= {_number(self.high)}"
        return noun


def _plain_numbers(values: list, integers: bool, low: float | None,
                   high: float | None) -> bool:
    """True when every item of `values` passes at a glance, in a few passes in C: plain ints
    (or floats), finite, in low..high and inside ±2**63 (a run's every token time). False:
    look item by item (and name the first bad one)."""
    if not values:
        return True
    kinds = set(map(type, values))
    if not kinds <= ({int} if integers else {int, float}):
        return False
    if float in kinds:
        try:
            if not math.isfinite(sum(values)):  # a nan or an infinity in it
                return False
        except OverflowError:  # an integer past a double's range
            return False
        if len(kinds) == 1 and low is None and high is None:
            return True  # finite floats, no range: nothing more to look at
    lo, hi = min(values), max(values)
    return (-INT_LIMIT < lo and hi < INT_LIMIT and (low is None or lo >= low)
            and (high is None or hi <= high))


def is_unicode(text: str) -> bool:
    """False for text holding a lone surrogate ("\\ud800", which JSON's escapes can spell and
    no UTF-8 writer takes): the one check every reader of JSON text uses."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_unicode(text: str, where: str) -> None:
    """Text UTF-8 can hold: a lone surrogate is refused here, not by whatever draws or
    encodes it later."""
    if not is_unicode(text):
        raise ValueError(f"{where}: expected text, got a lone surrogate (not valid Unicode)")


def shown(value, limit: int = 60) -> str:
    """`value` as a message shows it: its repr, or for a long one its kind and size."""
    if isinstance(value, list | dict | str) and len(value) > limit:
        kind = {list: "a list", dict: "an object", str: "text"}[type(value)]
        unit = "characters" if isinstance(value, str) else "items"
        return f"{kind} of {len(value):,} {unit}"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 190:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    try:
        text = repr(value)
    except RecursionError:  # a list nested past Python's recursion limit
        return "a deeply nested list"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _number(value: float) -> str:
    """1000000 -> "1,000,000"; 0.05 -> "0.05"."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def check_settings(settings: Mapping, table: Mapping[str, Setting], defaults: Mapping,
                   where: str) -> dict:
    """`defaults` overlaid with `settings`, every field of `table` checked (strict).

    Fields the table does not name are kept as they are (other versions' extras)."""
    if not isinstance(settings, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(settings).__name__}")
    merged = dict(defaults) | dict(settings)
    for key, setting in table.items():
        if key in merged:
            merged[key] = setting.check(merged[key], f"{where}.{key}")
    return merged


def clean_settings(settings: Mapping | None, table: Mapping[str, Setting],
                   defaults: Mapping) -> dict:
    """`defaults` overlaid with the fields of `settings` that pass their check."""
    merged = dict(defaults)
    for key, value in dict(settings or {}).items():
        setting = table.get(key)
        if setting is None:
            merged[key] = value
            continue
        try:
            merged[key] = setting.check(value, key)
        except ValueError:
            pass  # the default stays
    return merged


def option_error(error: ValueError, options: Mapping[str, str]) -> ValueError:
    """`error`, raised by checking settings under "settings", with "settings.<key>" replaced
    by the command-line option that sets <key> (`options`: key -> "--option"), for a CLI's
    one-line message; `error` itself when no option names its field."""
    text = str(error)
    for key, option in options.items():
        if text.startswith(f"settings.{key}:"):
            return ValueError(option + text[len(f"settings.{key}"):])
    return error


# ---- the rest of a snapshot section: objects, lists and maps of checked fields -------------

def read_object(value, where: str) -> dict:
    """`value` if it is a JSON object, else ValueError naming `where`."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {shown(value)}")
    return value


def read_fields(value, fields: Mapping[str, Reader], where: str,
                optional: Mapping[str, Any] | None = None) -> dict:
    """Every field of `fields` read from the object `value` by its reader: a field missing
    is an error, unless `optional` gives its default (used as it is, unread). Fields the
    table does not name are left out."""
    read_object(value, where)
    out = {}
    for key, read in fields.items():
        if key in value:
            out[key] = read(value[key], f"{where}.{key}")
        elif optional is not None and key in optional:
            out[key] = optional[key]
        else:
            raise ValueError(f"{where}: missing field {key!r}")
    return out


def read_list(value, item: Reader, where: str, max_len: int = 100_000) -> list:
    """A list of at most `max_len` items, each read by `item` (as "<where>[i]")."""
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list, got {shown(value)}")
    if len(value) > max_len:
        raise ValueError(f"{where}: expected a list of at most {max_len:,} items, got "
                         f"{len(value):,}")
    return [item(v, f"{where}[{i}]") for i, v in enumerate(value)]


def read_map(value, item: Reader, where: str, max_len: int = 100_000,
             keys: Setting | None = None) -> dict:
    """An object of name -> value, at most `max_len` of them, each value read by `item` (as
    "<where>[name]"); `keys`: a check of the names too."""
    read_object(value, where)
    if len(value) > max_len:
        raise ValueError(f"{where}: expected at most {max_len:,} entries, got {len(value):,}")
    out = {}
    for key, v in value.items():
        name = f"{where}[{shown(key, 40)}]"
        if keys is not None:
            keys.check(key, name)
        out[key] = item(v, name)
    return out


def read_tuple(value, items: Sequence[Reader], where: str, spelled: str) -> tuple:
    """A list of exactly len(items) values, the i-th read by items[i] (as "<where>[i]"): a
    pair such as [time_s, value]. `spelled`: the shape as the message shows it."""
    if not (isinstance(value, list) and len(value) == len(items)):
        raise ValueError(f"{where}: expected {spelled}, got {shown(value)}")
    return tuple(read(v, f"{where}[{i}]")
                 for i, (read, v) in enumerate(zip(items, value, strict=True)))


@contextmanager
def named(where: str) -> Iterator[None]:
    """A ValueError raised inside (a record's own check, "field 'x' must be ...") comes out
    as "<where>: <message>", unless it already names `where`."""
    try:
        yield
    except ValueError as e:
        text = str(e)
        if text.startswith(where):
            raise
        raise ValueError(f"{where}: {text}") from None


_ANNOTATED = {"int": Setting("int"), "float": Setting("float"), "str": Setting("str"),
              "bool": Setting("bool")}


def read_dataclass(cls, value, where: str, fields: Mapping[str, Reader] | None = None):
    """`cls(**value)` for a dataclass whose fields are read one by one: by `fields[name]`
    where given, else by the Setting its annotation names ("int", "float", "str", "bool",
    each with "| None"). A field with a default may be absent; other keys are ignored (a
    snapshot written by a newer InferLab may hold fields this one does not know; a preset,
    written by hand, is read by `presets.dataclass_from_dict`, which refuses them as typos)."""
    read_object(value, where)
    fields = fields or {}
    out = {}
    for f in dataclasses.fields(cls):
        if f.name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{where}: missing field {f.name!r}")
            continue
        read = fields.get(f.name)
        if read is None:
            kind = str(f.type).replace(" ", "")
            optional = kind.endswith("|None")
            setting = _ANNOTATED[kind.removesuffix("|None")]  # KeyError: give a reader
            read = Setting(setting.kind, none=True) if optional else setting
        out[f.name] = read(value[f.name], f"{where}.{f.name}")
    with named(where):
        return cls(**out)


def read_int_array(value, where: str, low: int, high: int, max_len: int = 10_000_000):
    """A list of integers in low..high as a 1-D int64 numpy array (checked at numpy's speed:
    a pool's blocks are many)."""
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list of integers, got {shown(value)}")
    if len(value) > max_len:
        raise ValueError(f"{where}: expected at most {max_len:,} integers, got {len(value):,}")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        array = None
    if array is None or array.ndim != 1 or (array.size and array.dtype.kind not in "iub"):
        raise ValueError(f"{where}: expected a list of integers, got {shown(value)}")
    array = array.astype(np.int64)
    if array.size and (array.min() < low or array.max() > high):
        bad = int(array[(array < low) | (array > high)][0])
        raise ValueError(f"{where}: expected integers in {_number(low)}..{_number(high)}, got "
                         f"{bad}")
    return array


# ---- a record's own fields: numbers an engine made, names, sequences ------------------------
# A frozen record checks itself when it is built (from an engine's values or a snapshot's), so
# these readers take what an engine hands them too: a numpy number, a tuple. The engine's own
# plain values pass at a glance: a run builds a record per iteration.

_COUNT = Setting("int", 0)
_TEXT = Setting("str")
_NAMES = Setting("str-list")


def read_count(value, where: str) -> int:
    """An integer >= 0 (below 2**63) as an int: a numpy integer is taken, a bool is not."""
    if type(value) is int and 0 <= value < INT_LIMIT:
        return value
    if isinstance(value, Integral) and not isinstance(value, bool):
        value = int(value)
    return _COUNT.check(value, where)


def read_float(value, where: str, low: float | None = None,
               high: float | None = None) -> float:
    """A finite number in low..high as a float: an int or a numpy number is taken, a bool is
    not ("<where>: expected a finite number >= 0, got -1")."""
    if type(value) is float and math.isfinite(value) and (low is None or value >= low) \
            and (high is None or value <= high):
        return value
    if isinstance(value, Real) and type(value) not in (bool, int, float):
        value = float(value)  # a numpy number (np.float64 is a float too)
    return float(Setting("float", low, high).check(value, where))


def read_seconds(value, where: str) -> float:
    """A time on a run's clock or a duration: a finite number >= 0, as a float."""
    return read_float(value, where, 0.0)


def read_probability(value, where: str) -> float:
    """A probability: a finite number in 0..1, as a float."""
    return read_float(value, where, 0.0, 1.0)


def read_floats(value, where: str, low: float | None = None, high: float | None = None,
                max_len: int = 10_000_000) -> tuple[float, ...]:
    """A list (or tuple) of at most `max_len` finite numbers in low..high as a tuple of floats,
    checked in a few passes in C when they are plain (a run's every token time); a bad one
    is named by its index ("<where>[3]: expected a finite number, got nan")."""
    if type(value) in (list, tuple) and len(value) <= max_len \
            and _plain_numbers(value, False, low, high):
        return tuple(map(float, value))
    numbers = Setting("float-list", low, high, max_len=max_len).check(
        list(value) if type(value) is tuple else value, where)
    return tuple(map(float, numbers))


def read_name(value, where: str) -> str:
    """Non-empty text: an id, a model's or a drafter's name."""
    if type(value) is str and value and value.isascii():
        return value
    if isinstance(value, str) and not value:
        raise ValueError(f"{where}: expected a name (non-empty text), got ''")
    return _TEXT.check(value, where)


def read_names(value, where: str) -> tuple[str, ...]:
    """A list (or tuple) of names (text), as a tuple: an iteration's request ids, checked in
    a few passes in C when they are plain; a bad one is refused as `Setting("str-list")`
    refuses it."""
    if type(value) in (tuple, list) and set(map(type, value)) <= {str} \
            and "".join(value).isascii():
        return value if type(value) is tuple else tuple(value)
    return tuple(_NAMES.check(list(value) if type(value) is tuple else value, where))


def as_tuple(read: Reader) -> Reader:
    """A reader of a list (a tuple is taken as one) whose result is a tuple: a frozen record's
    sequence, `as_tuple(Setting("int-list", 0))` a tuple of counts."""
    def read_as_tuple(value, where: str) -> tuple:
        return tuple(read(list(value) if type(value) is tuple else value, where))
    return read_as_tuple


def or_none(read: Reader) -> Reader:
    """A reader that takes null (None) as None and reads anything else with `read`."""
    def read_or_none(value, where: str):
        return None if value is None else read(value, where)
    return read_or_none


def check_fields(record, readers: Mapping[str, Reader]) -> None:
    """A frozen dataclass's own check, for its __post_init__: each field `readers` names is
    read in place, the value read replacing the one given (a numpy number becomes an int or a
    float, a list a tuple); a refusal names the field ("arrival_s: expected ..."), which
    `named` or the record's from_dict prefixes with where the record was read from."""
    for name, read in readers.items():
        value = getattr(record, name)
        got = read(value, name)
        if got is not value:
            object.__setattr__(record, name, got)
