"""The emulated board: the firmware on QEMU's mps2-an386 (Cortex-M4), over TCP.

`Emulator(image).start()` starts

    qemu-system-arm -M mps2-an386 -display none -monitor none -kernel IMAGE
        -serial tcp:127.0.0.1:PORT,server=on,wait=on,nodelay=on [-icount shift=5]

on a free port, connects, waits for the firmware's HELLO and returns the pyserial URL
`socket://127.0.0.1:PORT`, which `BoardLink` (and `inferlab board run --port`) open like a
real board's port. `stop()` ends QEMU. On Linux the child also gets SIGTERM when the THREAD
that started it ends (PR_SET_PDEATHSIG watches the starting thread, not the process): start
it from the main thread or from a thread that lives as long as the board, never from a
short-lived worker.

Why TCP: a pty drops what the guest writes before the host opens it; `nodelay` keeps a
round trip near 2 ms instead of ~48 ms. With `-icount shift=5` QEMU's virtual clock moves
32 ns per guest instruction, so SysTick cycles (25 MHz) and per-op times are deterministic
(cycles = 0.8 x instructions executed) rather than the host's wall-clock time; pass
`icount_shift=None` for wall-clock timing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from inferlab.engines.board.link import BoardError, BoardInfo, BoardLink
from inferlab.engines.board.toolchain import APT_PACKAGES, QEMU_TARGET, build_firmware, find_tool

MACHINE = "mps2-an386"
DEFAULT_ICOUNT_SHIFT = 5


class EmulatorError(OSError):
    """QEMU did not start, or the firmware did not answer HELLO; the message says which."""


def find_qemu() -> str:
    """Path of qemu-system-arm, or ToolMissing with the apt line that installs it."""
    return find_tool("qemu-system-arm", APT_PACKAGES)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: the child gets SIGTERM when the starting thread ends (no orphaned QEMU)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Emulator:
    """One QEMU process running one firmware image."""

    def __init__(self, image: str | os.PathLike, *, icount_shift: int | None =
                 DEFAULT_ICOUNT_SHIFT, startup_timeout_s: float = 20.0, qemu: str | None = None):
        self.image = Path(image)
        self.icount_shift = icount_shift
        self.startup_timeout_s = startup_timeout_s
        self.qemu = qemu
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self.url: str | None = None
        self.info: BoardInfo | None = None
        self._log = None

    def command(self, port: int) -> list[str]:
        cmd = [self.qemu or find_qemu(), "-M", MACHINE, "-display", "none", "-monitor", "none",
               "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on",
               "-kernel", str(self.image)]
        if self.icount_shift is not None:
            cmd += ["-icount", f"shift={int(self.icount_shift)}"]
        return cmd

    def start(self) -> str:
        """Start QEMU and wait for the firmware's HELLO; returns the `socket://` URL."""
        if self.running:
            return self.url
        if not self.image.is_file():
            raise EmulatorError(f"firmware image {self.image} does not exist (build it first)")
        self.qemu = self.qemu or find_qemu()
        last = ""
        for _ in range(3):  # another process may take the free port first: try again
            port = free_port()
            self._log = tempfile.TemporaryFile()
            self.process = subprocess.Popen(
                self.command(port), stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
            self.port, self.url = port, f"socket://127.0.0.1:{port}"
            try:
                self.info = self._wait_for_hello()
                return self.url
            except EmulatorError as exc:
                last = str(exc)
                log = self.log()
                self.stop()
                if "Address already in use" not in log and "Failed to bind" not in log:
                    raise
        raise EmulatorError(last)

    def _wait_for_hello(self) -> BoardInfo:
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self.process.poll() is not None:
                raise EmulatorError(f"QEMU exited with code {self.process.returncode}: "
                                    f"{self.log().strip()[-600:]}")
            try:
                with BoardLink(self.url, timeout_s=2.0, retries=2) as link:
                    return link.hello()
            except BoardError as exc:
                if time.monotonic() > deadline:
                    raise EmulatorError(f"the firmware on QEMU ({self.url}) did not answer "
                                        f"HELLO within {self.startup_timeout_s:g} s: {exc}; "
                                        f"QEMU says: {self.log().strip()[-600:]}") from None
                time.sleep(0.05)

    def log(self) -> str:
        """What QEMU printed so far."""
        if self._log is None:
            return ""
        try:
            self._log.seek(0)
            return self._log.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 5.0) -> None:
        """End QEMU (terminate, then kill)."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Emulator:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def emulate(model, preset: str = "nrf52840", out_dir=None, *, planner: str = "tflm-greedy",
            icount_shift: int | None = DEFAULT_ICOUNT_SHIFT):
    """Build the firmware for `model` and start it on QEMU: (FirmwareBuild, Emulator)."""
    build = build_firmware(model, QEMU_TARGET, preset, out_dir, planner=planner)
    emulator = Emulator(build.image, icount_shift=icount_shift)
    emulator.start()
    return build, emulator
