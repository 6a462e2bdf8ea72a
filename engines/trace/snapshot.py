"""The snapshot: one JSON file that is a Chrome/Perfetto trace and InferLab's own record.

Layout (key order matters: `displayTimeUnit` before `traceEvents`)::

    {"displayTimeUnit": "ms",
     "traceEvents": [...X, C, i, M events...],
     "inferlab": {"schema": "inferlab.snapshot/1", "app_version", "created_utc", "host",
                  "devices", "active_lab", "labs": {lab_id: {"settings", "state", "metrics"}}}}

Perfetto and chrome://tracing open the file as it is and ignore `inferlab`; InferLab reads
`inferlab` back into the same state records its views draw. Writes are atomic; reads are
validated (`SnapshotError` names the file and field); nothing is ever unpickled or evaluated.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from inferlab.engines.trace.atomic import atomic_write_text
from inferlab.engines.trace.jsonable import to_jsonable
from inferlab.engines.trace.snapshot_schema import (
    LAB_PARTS,
    SCHEMA,
    SnapshotError,
    validate_snapshot_dict,
)

__all__ = [
    "MAX_SNAPSHOT_BYTES",
    "SCHEMA",
    "Snapshot",
    "SnapshotError",
    "lab_section",
    "loads_snapshot",
    "make_snapshot",
    "read_snapshot",
    "snapshot_from_dict",
    "snapshot_to_dict",
    "write_snapshot",
]

MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024
DISPLAY_TIME_UNIT = "ms"


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """One exported session: host facts, every lab's sections, and the trace events."""

    app_version: str
    created_utc: str  # ISO 8601, UTC
    host: dict
    devices: tuple[dict, ...]
    active_lab: str | None
    labs: dict  # lab id -> {"settings": {...}, "state": {...}, "metrics": {...}}
    trace_events: tuple[dict, ...] = ()
    schema: str = SCHEMA

    def to_dict(self) -> dict:
        return snapshot_to_dict(self)


def section_field(mapping: dict, key: str, where: str):
    """`mapping[key]`, or ValueError("<where>: missing field 'key'") (section readers)."""
    if not isinstance(mapping, dict) or key not in mapping:
        raise ValueError(f"{where}: missing field {key!r}")
    return mapping[key]


def lab_section(
    settings: Mapping | None = None,
    state: object = None,
    metrics: Mapping | None = None,
) -> dict:
    """One lab's entry in `labs`; each part is converted with `to_jsonable` (None -> {}).

    `state` may be a state-record dataclass; it is stored as its dict.
    """
    parts = dict(zip(LAB_PARTS, (settings, state, metrics), strict=True))
    section = {}
    for part, value in parts.items():
        converted = to_jsonable({} if value is None else value)
        if not isinstance(converted, dict):
            raise TypeError(f"lab {part} must convert to a JSON object, got {type(value).__name__}")
        section[part] = converted
    return section


def make_snapshot(
    app_version: str,
    host: Mapping,
    devices: Sequence[Mapping],
    labs: Mapping[str, Mapping],
    trace_events: Sequence[Mapping] = (),
    active_lab: str | None = None,
    created_utc: str | None = None,
) -> Snapshot:
    """A validated Snapshot whose payloads are plain JSON (`to_jsonable` applied).

    `created_utc` defaults to now. Raises SnapshotError if the result would not read back.
    """
    for lab_id in labs:
        if not isinstance(lab_id, str):
            raise SnapshotError(f"<snapshot>: lab id {lab_id!r} is not a string")
    if created_utc is None:
        created_utc = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    snapshot = Snapshot(
        app_version=app_version,
        created_utc=created_utc,
        host=to_jsonable(host),
        devices=tuple(to_jsonable(list(devices))),
        active_lab=active_lab,
        labs=to_jsonable(labs),
        trace_events=tuple(to_jsonable(list(trace_events))),
    )
    validate_snapshot_dict(snapshot_to_dict(snapshot), "<snapshot>")
    return snapshot


def snapshot_to_dict(snapshot: Snapshot) -> dict:
    """The file's JSON object, keys in the order the file has them."""
    return {
        "displayTimeUnit": DISPLAY_TIME_UNIT,
        "traceEvents": list(snapshot.trace_events),
        "inferlab": {
            "schema": snapshot.schema,
            "app_version": snapshot.app_version,
            "created_utc": snapshot.created_utc,
            "host": snapshot.host,
            "devices": list(snapshot.devices),
            "active_lab": snapshot.active_lab,
            "labs": snapshot.labs,
        },
    }


def snapshot_from_dict(data: object, source: str = "<dict>") -> Snapshot:
    """Validate a parsed snapshot document and build its Snapshot."""
    validate_snapshot_dict(data, source)
    info = data["inferlab"]
    return Snapshot(
        app_version=info["app_version"],
        created_utc=info["created_utc"],
        host=info["host"],
        devices=tuple(info["devices"]),
        active_lab=info["active_lab"],
        labs=info["labs"],
        trace_events=tuple(data["traceEvents"]),
        schema=info["schema"],
    )


def write_snapshot(path: str | os.PathLike, snapshot: Snapshot) -> None:
    """Write `snapshot` to `path` atomically: the old file survives any failure intact."""
    data = snapshot_to_dict(snapshot)
    validate_snapshot_dict(data, str(path))
    atomic_write_text(path, _chunks(data))


def _chunks(data: dict) -> Iterator[str]:
    """The file text, one trace event per line, streamed (C encoder per piece)."""

    def dumps(value: object) -> str:
        return json.dumps(value, default=to_jsonable, allow_nan=False, ensure_ascii=False)

    yield f'{{"displayTimeUnit": {dumps(data["displayTimeUnit"])},\n"traceEvents": ['
    for i, event in enumerate(data["traceEvents"]):
        yield ("," if i else "") + "\n" + dumps(event)
    yield f'\n],\n"inferlab": {dumps(data["inferlab"])}\n}}\n'


def read_snapshot(path: str | os.PathLike, max_bytes: int = MAX_SNAPSHOT_BYTES) -> Snapshot:
    """Read and validate the snapshot at `path`; SnapshotError says what is wrong."""
    source = str(path)
    try:
        size = Path(path).stat().st_size
        if size > max_bytes:
            raise SnapshotError(
                f"{source}: file is {size / 2**20:.1f} MiB, over the "
                f"{max_bytes / 2**20:.0f} MiB limit for snapshots; refusing to load it"
            )
        raw = Path(path).read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise SnapshotError(f"{source}: cannot read: {getattr(exc, 'strerror', None) or exc}"
                            ) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{source}: not UTF-8 text (byte {exc.start}), so not JSON") from exc
    return loads_snapshot(text, source=source)


def loads_snapshot(text: str, source: str = "<string>") -> Snapshot:
    """Parse and validate snapshot JSON text; `source` names it in error messages."""
    if not text.strip():
        raise SnapshotError(f"{source}: file is empty, not a snapshot")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        ended = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated")
        hint = " (the text ends early)" if ended else ""
        raise SnapshotError(
            f"{source}: truncated or not JSON{hint}: {exc.msg} "
            f"(line {exc.lineno}, column {exc.colno})"
        ) from None
    except ValueError as exc:  # NaN / Infinity, refused by _reject_constant
        raise SnapshotError(f"{source}: {exc}") from None
    except RecursionError:
        raise SnapshotError(f"{source}: JSON nested too deeply to be a snapshot") from None
    return snapshot_from_dict(data, source)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON (write null for a missing number)")
