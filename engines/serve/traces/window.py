"""The `--window START:END` option of every lab that replays a published trace (batching,
endpoint): seconds after the trace's first arrival, either end optional.

    "10:70" -> (10.0, 70.0)    ":70" -> (0.0, 70.0)    "10:" or "10" -> (10.0, inf)
    None -> None

Both this and `stream.read_trace` (given a window as numbers) refuse a range that is not
0 ≤ start < end (`is_window`): a settings field that holds "5:2" is refused when it is read,
not when a file is."""

from __future__ import annotations


def parse_window(text: str | None) -> tuple[float, float] | None:
    """(start_s, end_s) of a START:END text, or None for no window; ValueError naming
    --window for text that is not START:END numbers."""
    if text is None:
        return None
    start, _, end = text.partition(":")
    try:
        window = float(start or 0), float(end) if end else float("inf")
    except ValueError:
        raise ValueError(f"--window must be START:END seconds, got {text!r}") from None
    if not is_window(*window):
        raise ValueError(f"--window must be START:END seconds with 0 ≤ START < END, got "
                         f"{text!r}")
    return window


def is_window(start_s: float, end_s: float) -> bool:
    """0 ≤ start_s < end_s (end_s may be infinite, neither NaN)."""
    return 0 <= start_s < end_s and end_s == end_s
