"""`inferlab virtual-board`: serve the board protocol on a pty (or a socket) until interrupted.

Prints one line, the URL to give `inferlab board ... --port` (a pty path such as
/dev/pts/3, or socket://127.0.0.1:PORT), then answers as the chosen board preset would,
running models on the arena interpreter within the preset's SRAM and flash.
"""

from __future__ import annotations

import signal
import sys

from inferlab.engines.board.board_server import BoardServer
from inferlab.engines.board.boards import DEFAULT_CODE_BYTES, DEFAULT_RUNTIME_OVERHEAD_BYTES
from inferlab.engines.board.virtual_board import VirtualBoard
from inferlab.engines.mcu.examples import model_argument
from inferlab.engines.mcu.planners import PLANNERS


def register(sub) -> None:
    p = sub.add_parser("virtual-board", help="serve a virtual board on a pty (Ctrl-C stops)")
    p.add_argument("--board", default="nrf52840", help="board preset id (default nrf52840)")
    p.add_argument("--model", type=model_argument,
                   help="hold this .tflite (a file or a shipped example's name) from the start, "
                        "as compiled-in firmware")
    p.add_argument("--socket", type=int, metavar="PORT",
                   help="serve on TCP 127.0.0.1:PORT instead of a pty (0: any free port)")
    p.add_argument("--max-payload", type=int, default=2048,
                   help="largest payload the board accepts, 64..4096 (default 2048)")
    p.add_argument("--runtime-overhead", type=int, metavar="BYTES",
                   help="SRAM the runtime uses besides the arena (default 8192)")
    p.add_argument("--code-bytes", type=int, metavar="BYTES",
                   help="flash the runtime's code takes (default 32768)")
    p.add_argument("--planner", default="tflm-greedy",
                   help="the board's own plan when the host sends none (default tflm-greedy)")
    p.set_defaults(func=run)


def run(args) -> int:

    if args.planner not in PLANNERS:
        raise ValueError(f"unknown planner {args.planner!r}; expected one of "
                         f"{', '.join(PLANNERS)}")
    board = VirtualBoard(
        args.board, max_payload=args.max_payload, planner=args.planner,
        runtime_overhead_bytes=(DEFAULT_RUNTIME_OVERHEAD_BYTES if args.runtime_overhead is None
                                else args.runtime_overhead),
        code_bytes=DEFAULT_CODE_BYTES if args.code_bytes is None else args.code_bytes)
    if args.model:
        with open(args.model, "rb") as f:
            board.preload(f.read())
    server = BoardServer(board)
    url = server.start_pty() if args.socket is None else server.start_socket(port=args.socket)
    print(url, flush=True)
    print(f"virtual {board.board.id} board ({board.board.core}, SRAM "
          f"{board.board.sram_bytes:,} B, flash {board.board.flash_bytes:,} B) serving on "
          f"{url}; Ctrl-C stops", file=sys.stderr, flush=True)

    def on_term(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        while server.running:
            server.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        server.stop()
    if server.error is not None:
        raise OSError(f"virtual board stopped: {server.error}")
    return 0
