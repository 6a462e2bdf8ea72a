"""Presets shipped as JSON files, `assets/<folder>/<id>.json`: listing, reading, strict fields.

Hardware roofs (`engines.hardware.presets`) load this way, and board presets
(`engines.board.boards`) live in the same assets package. `load_preset` is the whole path from
an id to a record: the id must be one of the files, the file must be JSON, the record is
built by the record type's own `from_dict(data, origin)` (most use `dataclass_from_dict`),
and its `id` field must be the file's name. Every error starts with where the data came
from (`origin`, e.g. `assets/hardware/l4.json`); `error` is the exception type a caller
raises for bad data (ValueError, or a subclass of it).
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def preset_dir(folder: str):
    """The `assets/<folder>` resource directory."""
    return importlib.resources.files("inferlab.assets") / folder


def preset_ids(folder: str) -> list[str]:
    """Ids of the presets in assets/<folder> (the `.json` files' names), sorted."""
    return sorted(p.name[: -len(".json")] for p in preset_dir(folder).iterdir()
                  if p.name.endswith(".json"))


def parse_json(text: str, origin: str, error: type[Exception] = ValueError) -> Any:
    """`text` as JSON; `error("<origin>: not valid JSON: ...")` when it is not."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{origin}: not valid JSON: {e}") from None


def load_preset(folder: str, id: str, kind: str, from_dict: Callable[[Any, str], T],
                error: type[Exception] = ValueError) -> T:
    """The preset `id` from assets/<folder>/<id>.json, built by `from_dict(data, origin)`.

    An unknown id is refused naming the known ones (`kind` says what was asked for, e.g.
    "hardware preset"); so is a file whose `id` field is not its name.
    """
    known = preset_ids(folder)
    if id not in known:
        raise error(f"unknown {kind} {id!r}; known: {', '.join(known)}")
    origin = f"assets/{folder}/{id}.json"
    data = parse_json((preset_dir(folder) / f"{id}.json").read_text(encoding="utf-8"), origin,
                      error)
    preset = from_dict(data, origin)
    if preset.id != id:
        raise error(f"{origin}: field 'id' is {preset.id!r}, expected {id!r}")
    return preset


def dataclass_from_dict(cls: type[T], d: Any, origin: str,
                        error: type[Exception] = ValueError) -> T:
    """`cls(**d)` for a dataclass, strictly: `d` must be a dict holding every field without a
    default and no other key (a preset file is written by hand: an unknown key is a typo).
    An `error` that `cls` raises is re-raised prefixed by `origin`."""
    if not isinstance(d, dict):
        raise error(f"{origin}: expected a JSON object, got {type(d).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise error(f"{origin}: unknown field {unknown[0]!r}")
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.name not in d:
            raise error(f"{origin}: missing field {f.name!r}")
    try:
        return cls(**d)
    except error as e:
        raise error(f"{origin}: {e}") from None
