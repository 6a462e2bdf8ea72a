"""A small in-process fuzzer for file readers: seeded mutators and a per-case hang guard.

`run_cases` calls each case's reader and sorts the outcome: success, the reader's own error
(the `allowed` types), or a failure (any other exception, or a case that ran past `HANG_S`).
The time limit is a hang detector, not a speed check: a healthy case takes milliseconds. On
POSIX a SIGALRM interrupts a case stuck in Python code (a loop over a count read from the
file); the exception it raises is a BaseException, so a reader's `except Exception` cannot
swallow it.
"""

from __future__ import annotations

import json
import math
import random
import signal
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

HANG_S = 30.0
"""Generous: a healthy case takes milliseconds; a reader stuck in a loop never ends. A tight
limit would flake on a shared 2-core machine and test speed, which benches measure."""


class CaseHung(BaseException):
    """Raised into a case that ran past HANG_S."""


@dataclass
class FuzzResult:
    cases: int = 0
    ok: int = 0
    refused: int = 0
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.cases} cases: {self.ok} loaded, {self.refused} refused, "
                f"{len(self.failures)} failed")

    def check(self) -> None:
        """Fail the test with the first failures, each named by its case."""
        assert not self.failures, self.summary() + "\n" + "\n\n".join(self.failures[:5])


def _on_alarm(signum, frame):
    raise CaseHung(f"ran past {HANG_S} s")


def run_cases(cases: Iterable[tuple[str, Callable[[], object]]],
              allowed: tuple[type[Exception], ...]) -> FuzzResult:
    """Run every (label, call); an exception not in `allowed` or a hang is a failure."""
    result = FuzzResult()
    alarm = hasattr(signal, "setitimer")
    old = signal.signal(signal.SIGALRM, _on_alarm) if alarm else None
    try:
        for label, call in cases:
            result.cases += 1
            start = time.perf_counter()
            try:
                if alarm:
                    signal.setitimer(signal.ITIMER_REAL, HANG_S)
                try:
                    call()
                finally:
                    if alarm:
                        signal.setitimer(signal.ITIMER_REAL, 0)
            except allowed:
                result.refused += 1
            except CaseHung:
                result.failures.append(f"{label}: hung (no answer within {HANG_S} s)")
                continue
            except Exception:
                result.failures.append(f"{label}:\n{traceback.format_exc(limit=-4)}")
                continue
            else:
                result.ok += 1
            elapsed = time.perf_counter() - start
            if elapsed > HANG_S:  # stuck in C code, where the alarm waits for it to return
                result.failures.append(f"{label}: took {elapsed:.1f} s (hang guard {HANG_S} s)")
    finally:
        if alarm:
            signal.signal(signal.SIGALRM, old)
    return result


# ---- byte mutators ---------------------------------------------------------------------------

def flip_bytes(data: bytes, rng: random.Random, lo: int = 0, hi: int | None = None,
               n: int | None = None) -> tuple[str, bytes]:
    """`n` (1-4) random bytes in data[lo:hi] set to random values."""
    out = bytearray(data)
    hi = len(data) if hi is None else hi
    changes = []
    for _ in range(n or rng.randint(1, 4)):
        i = rng.randrange(lo, hi)
        out[i] = rng.choice((0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        changes.append(f"{i}={out[i]:#04x}")
    return "bytes " + ",".join(changes), bytes(out)


def truncate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    n = rng.randrange(len(data))
    return f"cut at {n}", data[:n]


# ---- JSON mutators ---------------------------------------------------------------------------

# What a bad file puts where a value should be: zeros, negatives, huge and non-finite numbers,
# numbers of the wrong kind, and values of every other JSON type.
BAD_VALUES = (0, -1, 1, 3, 2**31, 2**32 - 1, 2**63, -(2**63), 10**30, 10**400, 0.5, 1.5, 1e30,
              -1e30, 1e-320, math.nan, math.inf, -math.inf, True, False, None, "", "x", "32",
              "\ud800", [], [1, 2], [0] * 3, {}, {"a": 1})
# Raw JSON text that no Python value dumps to: overflowing floats, >4300-digit integers.
RAW_TOKENS = ("1e999", "-1e999", "1" + "0" * 5000, "NaN", "-Infinity", "0e0", "-0")


def json_paths(value, prefix=()) -> list[tuple]:
    """The path (keys and indices) of every node in a JSON value, the root's () first."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += json_paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += json_paths(v, prefix + (i,))
    return out


def _replace(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replace(value[path[0]], path[1:], new)
    return copy


def _delete(value, path):
    copy = dict(value) if isinstance(value, dict) else list(value)
    if len(path) == 1:
        del copy[path[0]]
    else:
        copy[path[0]] = _delete(value[path[0]], path[1:])
    return copy


def mutate_json(value, rng: random.Random, paths: list | None = None) -> tuple[str, bytes]:
    """(label, JSON bytes) of `value` with one random node replaced, deleted or deeply
    nested, or written as a raw token (1e999, a 5000-digit integer, NaN, ...)."""
    label, text = _mutate_json(value, rng, paths)
    return label, text.encode()


def _mutate_json(value, rng: random.Random, paths: list | None) -> tuple[str, str]:
    paths = paths if paths is not None else json_paths(value)
    path = rng.choice(paths)
    kind = rng.random()
    if kind < 0.6:
        new = rng.choice(BAD_VALUES)
        return f"{list(path)} = {str(new)[:20]}", json.dumps(_replace(value, path, new))
    if kind < 0.7 and path:
        return f"del {list(path)}", json.dumps(_delete(value, path))
    if kind < 0.8:
        depth = rng.choice((10, 100, 500, 990, 5000, 100_000))
        marker = "__deep__"
        text = json.dumps(_replace(value, path, marker))
        return (f"{list(path)} nested {depth} deep",
                text.replace(f'"{marker}"', "[" * depth + "]" * depth, 1))
    token = rng.choice(RAW_TOKENS)
    marker = "__raw__"
    text = json.dumps(_replace(value, path, marker))
    return f"{list(path)} = raw {token[:12]}", text.replace(f'"{marker}"', token, 1)


def mutate_json_bytes(value, rng: random.Random, paths: list | None = None
                      ) -> tuple[str, bytes]:
    """A JSON-level mutation of `value` (mostly), or a byte flip or cut of its JSON text."""
    r = rng.random()
    if r < 0.75:
        return mutate_json(value, rng, paths)
    raw = json.dumps(value).encode()
    return flip_bytes(raw, rng) if r < 0.9 else truncate(raw, rng)


# ---- structure mutators (a parsed value, not its text) ---------------------------------------

DEEP = (8, 64, 300)
"""Nesting depths put in place of a value: a file's reader refuses more than 64, but a section
held in memory has no such guard."""
LONG = (1_000, 20_000)
"""Lengths a list is stretched to (its own items, repeated)."""


def sampled_paths(value, per_list: int = 2, prefix=()) -> list[tuple]:
    """`json_paths`, walking only the first `per_list` items of each list: every field of a
    record list is reached without one path per record, so each field is as likely a target."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += sampled_paths(v, per_list, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:per_list]):
            out += sampled_paths(v, per_list, prefix + (i,))
    return out


def _get(value, path):
    for key in path:
        value = value[key]
    return value


def mutate_value(value, rng: random.Random, paths: list | None = None) -> tuple[str, object]:
    """(label, a copy of `value` with one node changed): replaced by a bad value (BAD_VALUES:
    every other JSON type, zeros, huge and non-finite numbers), deleted, nested deep, or made
    a long list. Copies only the nodes on the changed path."""
    paths = paths if paths is not None else json_paths(value)
    path = rng.choice(paths)
    kind = rng.random()
    if kind < 0.6 or (kind < 0.7 and not path):
        new = rng.choice(BAD_VALUES)
        return f"{list(path)} = {str(new)[:20]}", _replace(value, path, new)
    if kind < 0.7:
        return f"del {list(path)}", _delete(value, path)
    if kind < 0.85:
        depth = rng.choice(DEEP)
        nested: list = []
        for _ in range(depth - 1):
            nested = [nested]
        return f"{list(path)} nested {depth} deep", _replace(value, path, nested)
    node = _get(value, path)
    n = rng.choice(LONG)
    items = node if isinstance(node, list) and node else [node]
    return (f"{list(path)} stretched to {n} items",
            _replace(value, path, [items[i % len(items)] for i in range(n)]))
