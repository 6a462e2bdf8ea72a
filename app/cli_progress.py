"""A progress bar on stderr for long command-line work (`inferlab run`, `inferlab bench`).

    with CliProgress("run batching") as progress:
        engine_work(progress=progress)        # progress(fraction, message), as the labs' tasks

The bar (tqdm) is drawn only when the stream is a terminal, and only once the work has run
for `delay_s`: a quick command, a pipe, a file or a test's captured stderr get nothing, and
stdout is never touched (`--json` stays pure JSON). Work that reports no fraction still shows
its elapsed time and latest message, redrawn every `tick_s` by a background thread, so that
nothing long is silent. The callback only stores what it is given: an engine may call it every
iteration, from any thread, for the price of two assignments.
"""

from __future__ import annotations

import os
import sys
import threading
import time

FULL = 1000  # the bar's units: a fraction to 0.1 %
SIZE = (80, 24)  # where the terminal does not say its size (a pty of size 0, a test's stream)
DELAY_S = 1.0
TICK_S = 0.2
RUNNING = "{desc}: {elapsed}{postfix}"
FRACTION = "{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}{postfix}"
FIXED = 22 + 20  # FRACTION's characters besides the description and message, a 20-wide bar


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def terminal_size(stream) -> tuple[int, int]:
    """(columns, rows) of the terminal behind `stream`; SIZE where it does not say (tqdm would
    draw nothing on a terminal of size 0)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):  # no fileno (io.UnsupportedOperation too)
        return SIZE
    return (size.columns or SIZE[0], size.lines or SIZE[1])


class CliProgress:
    """`progress(fraction, message)`: the work's own report (fraction in [0, 1] or None when it
    cannot tell); `describe(text)` renames the bar (bench all: the bench running now)."""

    def __init__(self, desc: str, stream=None, delay_s: float | None = None,
                 tick_s: float | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = is_terminal(self.stream)
        self.desc = desc
        self.delay_s = DELAY_S if delay_s is None else delay_s
        self.tick_s = TICK_S if tick_s is None else tick_s
        self.fraction: float | None = None
        self.message = ""
        self._bar = None  # a tqdm, once drawn
        self._columns = SIZE[0]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = time.monotonic()

    def __call__(self, fraction: float | None, message: str = "") -> None:
        if fraction is not None:
            self.fraction = min(max(float(fraction), 0.0), 1.0)
        self.message = message

    def describe(self, desc: str) -> None:
        self.desc = desc

    def __enter__(self) -> CliProgress:
        self._start = time.monotonic()
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name="cli-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.close()  # leave=False: the line is cleared for what the command prints

    def _tick(self) -> None:
        if self._stop.wait(self.delay_s):
            return
        # Imported here, when a bar is drawn: ~30 ms that no quick or piped command pays.
        from tqdm import tqdm

        columns, rows = terminal_size(self.stream)
        self._columns = columns
        try:
            self._bar = tqdm(total=FULL, desc=self.desc, file=self.stream, leave=False,
                             ncols=columns, nrows=rows, bar_format=RUNNING)
            self._bar.start_t -= time.monotonic() - self._start  # elapsed from the work's start
            while True:
                self._draw()
                if self._stop.wait(self.tick_s):
                    return
        except (OSError, ValueError):  # the terminal went away (closed, a broken pipe)
            return

    def _draw(self) -> None:
        bar, fraction, message = self._bar, self.fraction, self.message
        bar.desc = self.desc
        if fraction is not None:
            bar.bar_format = FRACTION
            bar.n = round(fraction * FULL)
        room = max(self._columns - len(self.desc) - FIXED, 8)  # a long message, not the bar, is cut
        if len(message) > room:
            message = message[:room - 1] + "…"
        bar.set_postfix_str(message, refresh=False)
        bar.refresh()
