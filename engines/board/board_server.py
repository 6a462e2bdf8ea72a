"""A virtual board on a line a host opens: `BoardServer` serves one `VirtualBoard` on a pty
(`start_pty() -> "/dev/pts/N"`) or a TCP socket (`start_socket() ->
"socket://127.0.0.1:PORT"`) from a background thread until `stop()`; `serve` builds a board
and starts its server. The board's logic (bytes in, bytes out) is `virtual_board.py`'s; this
module only moves the bytes.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time

from inferlab.engines.board.boards import BoardPreset
from inferlab.engines.board.virtual_board import VirtualBoard


class BoardServer:
    """Serves one VirtualBoard on a pty or a TCP socket from a background thread."""

    def __init__(self, board: VirtualBoard):
        self.board = board
        self.url: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fds: list[int] = []
        self._listener: socket.socket | None = None
        self._conn: socket.socket | None = None
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def start_pty(self) -> str:
        """Open a pty (raw mode), serve on its master; return the path a host opens."""
        import tty  # here, not at the top: tty needs termios, which Windows lacks

        master, slave = os.openpty()
        tty.setraw(slave)
        os.set_blocking(master, False)
        self._fds = [master, slave]  # the slave stays open: the master never sees EIO
        self.url = os.ttyname(slave)
        self._start(self._serve_pty, master)
        return self.url

    def start_socket(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on host:port (0: any free port); return the `socket://` URL."""
        listener = socket.create_server((host, port))
        listener.settimeout(0.05)
        self._listener = listener
        self.url = f"socket://{host}:{listener.getsockname()[1]}"
        self._start(self._serve_socket, listener)
        return self.url

    def _start(self, target, arg) -> None:
        self._thread = threading.Thread(target=self._guard, args=(target, arg),
                                        name="virtual-board", daemon=True)
        self._thread.start()

    def _guard(self, target, arg) -> None:
        try:
            target(arg)
        except BaseException as exc:  # noqa: BLE001 - recorded for the owner to see
            if not self._stop.is_set():
                self.error = exc

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout_s: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def stop(self, timeout_s: float = 2.0) -> None:
        """Vanish at once (as an unplugged board does), then end the thread."""
        self._stop.set()
        with self._lock:
            if self._fds:
                # Replace the pty master by /dev/null: the pty hangs up now, and the number
                # stays valid for the serving thread (no reuse race); it closes it itself.
                null = os.open(os.devnull, os.O_RDWR)
                try:
                    os.dup2(null, self._fds[0])
                finally:
                    os.close(null)
            if self._conn is not None:
                try:
                    self._conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.join(timeout_s)

    def __enter__(self) -> BoardServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- loops --------------------------------------------------------------------------

    def _serve_pty(self, master: int) -> None:
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([master], [], [], 0.05)
                if not ready:
                    continue
                try:
                    data = os.read(master, 65536)
                except BlockingIOError:
                    continue
                except OSError:  # EIO: no slave open; cannot happen while we hold one
                    time.sleep(0.05)
                    continue
                if not data:
                    if self._stop.is_set():
                        break
                    continue
                self._send_fd(master, self.board.feed(data))
        finally:
            with self._lock:
                for fd in self._fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                self._fds = []

    def _send_fd(self, fd: int, data: bytes, timeout_s: float = 1.0) -> None:
        """Write everything, unless nobody drains the line for `timeout_s` (then drop it)."""
        view = memoryview(data)
        deadline = time.monotonic() + timeout_s
        while view and not self._stop.is_set() and time.monotonic() < deadline:
            _, ready, _ = select.select([], [fd], [], 0.05)
            if not ready:
                continue
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue

    def _serve_socket(self, listener: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.settimeout(0.05)
                with self._lock:
                    self._conn = conn
                try:
                    self._serve_conn(conn)
                finally:
                    with self._lock:
                        self._conn = None
                    conn.close()
        finally:
            listener.close()

    def _serve_conn(self, conn: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return  # the host closed: wait for the next one
            reply = self.board.feed(data)
            if reply:
                try:
                    conn.settimeout(1.0)
                    conn.sendall(reply)
                    conn.settimeout(0.05)
                except OSError:
                    return


def serve(board: str | BoardPreset = "nrf52840", transport: str = "pty", **kwargs
          ) -> BoardServer:
    """Build a VirtualBoard and start serving it; returns the running server (`.url`)."""
    server = BoardServer(VirtualBoard(board, **kwargs))
    if transport == "pty":
        server.start_pty()
    elif transport == "socket":
        server.start_socket()
    else:
        raise ValueError(f"transport must be 'pty' or 'socket', got {transport!r}")
    return server
