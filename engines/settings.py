"""A lab's settings, checked field by field: the lab's inputs, remembered settings and a
snapshot's `labs.<id>.settings` all go through the same `Setting` table.

`check_settings` is strict (ValueError naming the field and the accepted range: snapshot
reading); `clean_settings` keeps what is valid and puts the default back for the rest
(settings remembered from an older InferLab, hand-edited files).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """One field: its kind, and a closed range (numbers) or the values allowed."""

    kind: str  # "int", "float", "str", "bool" or "str-list"
    low: float | None = None
    high: float | None = None
    choices: tuple | Callable[[], Any] | None = None  # a callable: asked when checking

    def check(self, value, where: str):
        """`value` if it is acceptable, else ValueError("<where>: expected ..., got ...")."""
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{where}: expected true or false, got {value!r}")
            return value
        if self.kind in ("int", "float"):
            ok = isinstance(value, int) if self.kind == "int" else isinstance(value, int | float)
            if isinstance(value, bool) or not ok or not math.isfinite(value):
                raise ValueError(f"{where}: expected {self._range_text()}, got {value!r}")
            if (self.low is not None and value < self.low) or \
                    (self.high is not None and value > self.high):
                raise ValueError(f"{where}: expected {self._range_text()}, got {value!r}")
            return value
        if self.kind == "str-list":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}: expected a list of names, got {value!r}")
            for v in value:
                self._check_choice(v, where)
            return list(value)
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a name (text), got {value!r}")
        self._check_choice(value, where)
        return value

    def _check_choice(self, value: str, where: str) -> None:
        if self.choices is None:
            return
        allowed = tuple(self.choices() if callable(self.choices) else self.choices)
        if value not in allowed:
            raise ValueError(f"{where}: expected one of {', '.join(map(str, allowed))}, "
                             f"got {value!r}")

    def _range_text(self) -> str:
        noun = "an integer" if self.kind == "int" else "a finite number"
        if self.low is not None and self.high is not None:
            return f"{noun} in {_number(self.low)}..{_number(self.high)}"
        if self.low is not None:
            return f"{noun} >= {_number(self.low)}"
        return noun


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
