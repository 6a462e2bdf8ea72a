"""Helpers for the tests that talk to virtual boards (engines.board.virtual_board): a hang
guard, a stand-in for the arena interpreter, and boards served for the length of a test.

Each test module keeps its own small fixtures (its guard's seconds, its stub's timings) and
builds them from these.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from inferlab.engines.board.board_server import BoardServer
from inferlab.engines.board.virtual_board import VirtualBoard


@contextmanager
def hang_guard(seconds: int) -> Iterator[None]:
    """Raise TimeoutError in the main thread after `seconds` (SIGALRM) instead of letting a
    test that waits on a board block the run; the old handler comes back afterwards."""

    def fail(*_):
        raise TimeoutError(f"test exceeded its {seconds} s guard")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def plus_one_interpreter(op_ns: Callable[[int], int], delay_s: float = 0.0):
    """An `interpreter_factory` standing in for the arena interpreter: each output tensor is
    the inputs' bytes, repeated or cut to its size, plus one (wrapping); op i reports
    `op_ns(i)` ns; each run first sleeps `delay_s`."""

    def factory(model, plan):
        def run(inputs):
            if delay_s:
                time.sleep(delay_s)
            flat = np.concatenate([a.reshape(-1).view(np.uint8) for a in inputs])
            outs = []
            for t in model.outputs:
                tensor = model.tensors[t]
                raw = np.resize(flat, tensor.nbytes).astype(np.uint8) + np.uint8(1)
                outs.append(raw.view(np.dtype(tensor.dtype)).reshape(tensor.shape))
            return outs, [op_ns(i) for i in range(len(model.operators))]

        return run

    return factory


@contextmanager
def served_boards() -> Iterator[Callable[..., tuple[BoardServer, str]]]:
    """`serve(board, transport="pty" | "socket") -> (server, url)`: serves a VirtualBoard
    until the block ends, then stops every server and checks none of them failed."""
    servers: list[BoardServer] = []

    def serve(board: VirtualBoard, transport: str = "pty") -> tuple[BoardServer, str]:
        server = BoardServer(board)
        servers.append(server)
        return server, (server.start_pty() if transport == "pty" else server.start_socket())

    try:
        yield serve
    finally:
        for s in servers:
            s.stop()
    for s in servers:
        assert not s.running and s.error is None
