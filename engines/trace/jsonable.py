"""Plain JSON values from the objects engines hand out.

`to_jsonable` is the one conversion every JSON writer uses (snapshots, `--json` output):
frozen-dataclass records, numpy arrays and scalars, torch tensors, tuples, sets, paths and
enums become dicts, lists, strings, numbers, booleans and None. Non-finite floats (NaN, ±inf)
become None: JSON has no NaN and Perfetto refuses traces that contain it.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import sys
from collections.abc import Mapping
from pathlib import PurePath

import numpy as np

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


def to_jsonable(obj: object) -> JsonValue:
    """`obj` as plain JSON types, recursively; TypeError naming the type of anything else.

    Dataclass instances go through their `to_dict()` when they have one, else their fields.
    Sets become sorted lists so the output does not depend on hash order.
    """
    if obj is None or type(obj) is bool or type(obj) is str:
        return obj
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):  # np.float64 is a float subclass
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, Mapping):
        return _mapping(obj)
    if isinstance(obj, list | tuple):
        return [to_jsonable(item) for item in obj]
    if isinstance(obj, set | frozenset):
        return _sorted([to_jsonable(item) for item in obj])
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _dataclass(obj)
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, np.dtype):
        return str(obj)
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, datetime.datetime | datetime.date | datetime.time):
        return obj.isoformat()
    converted = _torch(obj)
    if converted is not _NOT_TORCH:
        return converted
    raise TypeError(f"cannot convert {_type_name(obj)} to JSON")


def _mapping(obj: Mapping) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for key, value in obj.items():
        name = _key(key)
        if name in out:
            raise ValueError(f"keys collide in JSON: {key!r} becomes {name!r} twice")
        out[name] = to_jsonable(value)
    return out


def _key(key: object) -> str:
    """A mapping key as a JSON object key, spelled the way `json.dumps` spells it."""
    if isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, np.generic):
        key = key.item()
    if isinstance(key, str):
        return str(key)
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(to_jsonable(key))
    raise TypeError(f"cannot use a {_type_name(key)} as a JSON object key")


def _dataclass(obj: object) -> JsonValue:
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_jsonable(to_dict())
    return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _sorted(items: list[JsonValue]) -> list[JsonValue]:
    try:
        return sorted(items)
    except TypeError:  # mixed types: order by their JSON text instead
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


_NOT_TORCH = object()


def _torch(obj: object) -> object:
    """Tensors, dtypes and devices, if torch is loaded at all (never imported here)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return _NOT_TORCH
    if isinstance(obj, torch.Tensor):
        tensor = obj.detach().cpu()
        if tensor.is_floating_point() and tensor.dtype not in (torch.float32, torch.float64):
            tensor = tensor.float()  # bf16 / fp16 / fp8 values, exactly, as fp32
        return to_jsonable(tensor.tolist())
    if isinstance(obj, torch.dtype | torch.device):
        return str(obj)
    return _NOT_TORCH


def _type_name(obj: object) -> str:
    cls = type(obj)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
