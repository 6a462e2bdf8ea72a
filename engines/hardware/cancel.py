"""Stopping a long measurement between its pieces."""

from __future__ import annotations

from collections.abc import Callable


class Cancelled(Exception):
    """A measurement stopped early because its `should_stop()` returned True."""


def check_stop(should_stop: Callable[[], bool] | None) -> None:
    """Raise Cancelled when `should_stop` is given and says so."""
    if should_stop is not None and should_stop():
        raise Cancelled("measurement cancelled")
