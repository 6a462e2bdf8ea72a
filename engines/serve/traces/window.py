"""The `--window START:END` option of every lab that replays a published trace (batching,
endpoint): seconds after the trace's first arrival, either end optional.

    "10:70" -> (10.0, 70.0)    ":70" -> (0.0, 70.0)    "10:" or "10" -> (10.0, inf)
    None -> None

`stream.read_trace` checks the range itself (0 ≤ start < end); this only reads the text."""

from __future__ import annotations


def parse_window(text: str | None) -> tuple[float, float] | None:
    """(start_s, end_s) of a START:END text, or None for no window; ValueError naming
    --window for text that is not START:END numbers."""
    if text is None:
        return None
    start, _, end = text.partition(":")
    try:
        return float(start or 0), float(end) if end else float("inf")
    except ValueError:
        raise ValueError(f"--window must be START:END seconds, got {text!r}") from None
