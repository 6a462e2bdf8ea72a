"""What a valid `inferlab.snapshot/1` document is, checked field by field.

`validate_snapshot_dict` raises `SnapshotError` with a message that names the source (a
path) and the field at fault, so a user who opens a bad file learns what is wrong with it.
Before the fields, every value of the document is walked (without recursion): nesting at
most MAX_DEPTH deep, numbers finite and within a double's range (1e999 parses as inf, and
a 400-digit integer converts to no float), strings valid Unicode (JSON's "\ud800" escape
decodes to a lone surrogate that no UTF-8 writer accepts).
"""

from __future__ import annotations

import datetime
import math
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from inferlab.engines.fields import is_unicode

Fail = Callable[[str], NoReturn]

SCHEMA_NAME = "inferlab.snapshot"
SCHEMA_VERSION = 1
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"
LAB_PARTS = ("settings", "state", "metrics")
LAB_ID_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
MAX_DEPTH = 64  # containers inside containers; a snapshot's own layout uses about six
MAX_NUMBER = sys.float_info.max


class SnapshotError(ValueError):
    """A snapshot that cannot be read or written; the message names the file and field."""


def validate_snapshot_dict(data: object, source: str) -> None:
    """Raise SnapshotError unless `data` is a complete snapshot/1 document."""

    def fail(message: str) -> NoReturn:
        raise SnapshotError(f"{source}: {message}")

    if not isinstance(data, dict):
        hint = (
            " (a bare Chrome trace event array, not an InferLab snapshot)"
            if isinstance(data, list)
            else ""
        )
        fail(f"top level is {_kind(data)}, expected a JSON object{hint}")
    _check_values(data, fail)
    if "traceEvents" not in data:
        fail("missing 'traceEvents': not a Chrome trace, so not an InferLab snapshot")
    if "inferlab" not in data:
        fail("missing 'inferlab' object: a Chrome trace, but not an InferLab snapshot")
    info = data["inferlab"]
    if not isinstance(info, dict):
        fail(f"'inferlab' is {_kind(info)}, expected an object")
    _check_schema(info.get("schema"), fail)
    _check_events(data["traceEvents"], fail)
    _check_info(info, fail)


def _check_values(data: object, fail: Fail) -> None:
    """Every value below `data`: depth, numbers and strings (see the module docstring).

    Iterative, and fast on big traces: values are dispatched on their exact type, and the
    path to a bad value is only worked out (from the parents, by identity) to report it.
    """
    stack: list[tuple] = [(data, 0, None)]  # (container, depth, parent entry)
    while stack:
        entry = stack.pop()
        container, depth, _ = entry
        if depth >= MAX_DEPTH:
            fail(f"{_path(entry)} is nested more than {MAX_DEPTH} levels deep")
        if type(container) is dict or isinstance(container, dict):
            try:
                keys = "".join(container)
            except TypeError:  # non-string keys (a writer's; json.dumps converts them)
                keys = "".join(k for k in container if isinstance(k, str))
            if not keys.isascii() and not all(
                    is_unicode(k) for k in container if isinstance(k, str)):
                fail(f"{_path(entry)} has a key that is not valid Unicode (a lone surrogate)")
            values = container.values()
        else:
            values = container
        for value in values:
            t = type(value)
            if t is str:
                if not value.isascii() and not is_unicode(value):
                    fail(f"{_path(entry, value)} is a string that is not valid Unicode (a "
                         "lone surrogate)")
            elif t is float:
                if value - value != 0.0:  # inf - inf and NaN - NaN are NaN
                    fail(f"{_path(entry, value)} is {value}, not a finite number (a literal "
                         "like 1e999 overflows)")
            elif t is int:
                if value > MAX_NUMBER or value < -MAX_NUMBER:
                    fail(f"{_path(entry, value)} is an integer of {len(str(abs(value)))} "
                         "digits, past the range of a JSON number (±1.8e308)")
            elif t is dict or t is list or t is tuple or isinstance(value, dict | list | tuple):
                if value:
                    stack.append((value, depth + 1, entry))
            elif isinstance(value, float | int | str) and not isinstance(value, bool):
                stack.append(([_plain(value)], depth, entry))  # a subclass: check its value


def _plain(value: object) -> object:
    for t in (str, int, float):
        if isinstance(value, t):
            return t(value)
    return value




def _path(entry: tuple, value: object = None) -> str:
    """Where a walk's container `entry` (and `value` inside it) sits, spelled as the other
    messages spell fields: inferlab.labs.kv.state, traceEvents[3].args."""
    chain = []
    while entry is not None:
        chain.append(entry)
        entry = entry[2]
    parts: list[str] = []
    for parent, child in zip(chain[::-1], [*chain[-2::-1], None], strict=True):
        target = child[0] if child is not None else value
        if child is None and value is None:
            break
        items = parent[0].items() if isinstance(parent[0], dict) else enumerate(parent[0])
        key = next((k for k, v in items if v is target), "?")
        parts.append(f"[{key}]" if isinstance(key, int) else f".{str(key)[:40]}")
    return "".join(parts).lstrip(".") or "the top level"


def _check_schema(schema: object, fail: Fail) -> None:
    if schema is None:
        fail(f"inferlab.schema is missing; this InferLab reads {SCHEMA}")
    if schema == SCHEMA:
        return
    if not isinstance(schema, str):
        fail(f"inferlab.schema is {_kind(schema)}, not a supported schema; this InferLab "
             f"reads {SCHEMA}")
    name, _, version = schema.partition("/")
    if name == SCHEMA_NAME and version.isdigit() and int(version) > SCHEMA_VERSION:
        fail(
            f"inferlab.schema is {schema!r}: written by a newer InferLab; "
            f"this version reads {SCHEMA}"
        )
    fail(f"inferlab.schema is {schema!r}, not a supported schema; this InferLab reads {SCHEMA}")


def _check_events(events: object, fail: Fail) -> None:
    if not isinstance(events, list):
        fail(f"traceEvents is {_kind(events)}, expected a list")
    for i, event in enumerate(events):
        where = f"traceEvents[{i}]"
        if not isinstance(event, dict):
            fail(f"{where} is {_kind(event)}, expected an object")
        ph = event.get("ph")
        if not isinstance(ph, str) or not ph:
            fail(f"{where} has no 'ph' (event phase) string")
        if "ts" in event and not _is_number(event["ts"]):
            fail(f"{where}.ts is {_kind(event['ts'])}, expected a number of microseconds")
        if ph == "X":
            for key in ("ts", "dur"):
                if not _is_number(event.get(key)):
                    fail(f"{where} is an 'X' span without a numeric '{key}'")
            if event["dur"] < 0:
                fail(f"{where}.dur is negative ({event['dur']})")


def _check_info(info: dict, fail: Fail) -> None:
    if not isinstance(info.get("app_version"), str):
        fail("inferlab.app_version is missing or not a string")
    created = info.get("created_utc")
    if not isinstance(created, str) or not _is_iso8601(created):
        shown = repr(created) if isinstance(created, str) and len(created) <= 40 else _kind(created)
        fail(f"inferlab.created_utc is {shown}, expected an ISO 8601 date-time string")
    if not isinstance(info.get("host"), dict):
        fail(f"inferlab.host is {_kind(info.get('host'))}, expected an object")
    devices = info.get("devices")
    if not isinstance(devices, list):
        fail(f"inferlab.devices is {_kind(devices)}, expected a list")
    for i, device in enumerate(devices):
        if not isinstance(device, dict):
            fail(f"inferlab.devices[{i}] is {_kind(device)}, expected an object")
    if "active_lab" not in info:
        fail("inferlab.active_lab is missing (a lab id, or null)")
    active = info["active_lab"]
    if active is not None and not isinstance(active, str):
        fail(f"inferlab.active_lab is {_kind(active)}, expected a lab id string or null")
    _check_labs(info.get("labs"), fail)


def _check_labs(labs: object, fail: Fail) -> None:
    if not isinstance(labs, dict):
        fail(f"inferlab.labs is {_kind(labs)}, expected an object of lab id -> section")
    for lab_id, section in labs.items():
        if not isinstance(lab_id, str):
            fail(f"inferlab.labs has a non-string lab id {lab_id!r}")
        if not LAB_ID_PATTERN.fullmatch(lab_id):
            fail(f"inferlab.labs has lab id {lab_id!r}; lab ids are lowercase identifiers")
        where = f"inferlab.labs.{lab_id}"
        if not isinstance(section, dict):
            fail(f"{where} is {_kind(section)}, expected an object with {', '.join(LAB_PARTS)}")
        for part in LAB_PARTS:
            if not isinstance(section.get(part), dict):
                fail(f"{where}.{part} is {_kind(section.get(part))}, expected an object")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_iso8601(text: str) -> bool:
    try:
        datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _kind(value: object) -> str:
    """How a JSON value reads in a message: 'missing', 'a list', 'the string "x"', ..."""
    if value is None:
        return "missing or null"
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    name = names.get(type(value), f"a {type(value).__name__}")
    if not isinstance(value, str | int | float):
        return name
    text = repr(value)
    return f"{name} ({text if len(text) <= 40 else text[:37] + '...'})"
