"""Connecting the MCU lab to a board: the session (link + an in-process virtual board or an
emulated one on QEMU) and what the user chose to connect to (`BoardChoice`). The Connect
board… dialog that makes the choice is `views.mcu_connect_dialog.ConnectDialog`.

`BoardSession` does blocking serial I/O: the lab calls it from worker tasks, one at a time.
Every failure is a `BoardError` (an OSError) with a one-line message; after one the session
can connect again (a killed virtual board is started afresh).

The emulated board is the C firmware built for the lab's model and plan, running on QEMU's
mps2-an386; from its `socket://` URL on it is driven exactly like a real board. QEMU is
started from one long-lived thread of the session, never from a worker task's thread: the
emulator asks Linux to end QEMU when the thread that started it ends (PR_SET_PDEATHSIG
watches the thread, not the process). The session stops QEMU when it connects elsewhere and
in `close()`, also when `close()` comes while QEMU is still starting.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from inferlab.engines.board.board_server import serve
from inferlab.engines.board.emulator import Emulator, find_qemu
from inferlab.engines.board.link import BoardDisconnected, BoardError, BoardLink
from inferlab.engines.board.toolchain import (
    QEMU_TARGET,
    ToolMissing,
    build_firmware,
    default_out_dir,
    require_tools,
)
from inferlab.engines.mcu.planners import PLANNERS

VIRTUAL = "virtual"
PORT = "port"
EMULATED = "qemu"
FIRMWARE_PLANNER = "tflm-greedy"  # what the firmware is built with when the lab's plan cannot be


@dataclass(frozen=True)
class BoardChoice:
    """What to connect to: a virtual board of preset `target`, a pyserial URL, or the
    firmware for `model` (a .tflite path) and `planner` on QEMU with preset `target`'s memory."""

    kind: str  # VIRTUAL, PORT or EMULATED
    target: str  # board preset id, or URL
    model: str = ""  # EMULATED only
    planner: str = ""  # EMULATED only: a buffer planner (engines.mcu.planners.PLANNERS)

    def label(self) -> str:
        if self.kind == VIRTUAL:
            return f"virtual {self.target} (in-process)"
        if self.kind == EMULATED:
            return f"qemu {self.target}"
        return self.target


def firmware_planner(planner: str) -> tuple[str, str]:
    """(the planner the firmware is built with, why it is not `planner`, or "").

    The firmware holds TFLM's own buffers at planned offsets: only buffer planners (linear,
    tflm-greedy, best) go into it; reordered, aliased and patch-based plans do not.
    """
    if planner in PLANNERS:
        return planner, ""
    return FIRMWARE_PLANNER, (f"the {planner} plan reorders, aliases or patches, which the "
                              f"firmware cannot hold: it is built with {FIRMWARE_PLANNER}")


def emulator_missing() -> str:
    """"" when QEMU and the Arm cross compiler are installed, else what is missing and the
    exact command that installs it."""
    try:
        find_qemu()
        require_tools(QEMU_TARGET)
    except ToolMissing as exc:
        return str(exc)
    return ""


class BoardSession:
    """One board connection at a time; `connect`, `run` and `close` may be called again."""

    def __init__(self, timeout_s: float = 2.0, images_dir: str | Path | None = None):
        """`images_dir`: where emulated boards' firmware is built (default: the firmware
        build folder in the user's cache, `toolchain.default_out_dir`)."""
        self.timeout_s = timeout_s
        self.images_dir = Path(images_dir) if images_dir is not None else None
        self.choice: BoardChoice | None = None
        self.link: BoardLink | None = None
        self.server = None  # the in-process virtual board's BoardServer
        self.emulator = None  # the emulated board's running Emulator (QEMU)
        self.firmware = None  # the FirmwareBuild the emulator runs
        self.info = None
        self._lock = threading.Lock()
        self._epoch = 0  # close() counts up: a QEMU start begun before it is stopped after it
        self._starting = None  # the Emulator whose QEMU is starting
        self._starter: ThreadPoolExecutor | None = None  # the one thread that starts QEMU

    @property
    def connected(self) -> bool:
        return self.link is not None and self.link.is_open

    @property
    def emulated(self) -> bool:
        return self.choice is not None and self.choice.kind == EMULATED

    @property
    def url(self) -> str:
        return self.link.url if self.link is not None else ""

    def connect(self, choice: BoardChoice | None = None, progress=None):
        """Open the link (starting the virtual or emulated board first if needed) and ask
        HELLO. `progress(fraction, message)` hears about the firmware build and QEMU."""
        choice = choice or self.choice
        if choice is None:
            raise BoardDisconnected("no board chosen: use Connect board…")
        self._close_link()
        if choice.kind == VIRTUAL:
            self._stop_emulator()
            if self.server is None or not self.server.running or self.choice != choice:
                self._stop_server()
                self.server = serve(choice.target, "socket")
            url = self.server.url
        elif choice.kind == EMULATED:
            self._stop_server()
            if self.emulator is None or not self.emulator.running or self.choice != choice:
                self._stop_emulator()
                self._start_emulator(choice, progress or (lambda fraction, message: None))
            url = self.emulator.url
        else:
            self._stop_server()
            self._stop_emulator()
            url = choice.target
        self.choice = choice
        try:
            if choice.kind == EMULATED and progress is not None:
                progress(0.9, f"QEMU answers on {url}")
            self.link = BoardLink(url, timeout_s=self.timeout_s)
            self.info = self.link.hello()
        except BaseException:
            self._close_link()
            if choice.kind == EMULATED:  # started for this link: the next connect starts afresh
                self._stop_emulator()
            raise
        return self.info

    def run(self, model_bytes: bytes, plan, inputs: bytes, progress=None):
        """Upload the model when the board holds another, send `plan`, run `inputs`.

        Returns (BoardResult, uploaded). A lost connection closes the link (BoardDisconnected).
        A board that holds another model and takes no uploads (firmware with a compiled-in
        model) is a BoardError saying so.
        """
        if not self.connected:
            raise BoardDisconnected(f"{self.choice.label() if self.choice else 'board'} is not "
                                    "connected: use Connect board… to reconnect")
        link = self.link
        try:
            info = link.hello()
            digest = hashlib.sha256(model_bytes).hexdigest()
            uploaded = False
            if info.model_sha256 != digest:
                if not info.can_load:
                    held = f"sha256 {info.model_sha256[:16]}…" if info.model_sha256 else "no model"
                    raise BoardError(f"{info.board} on {link.url} holds another model ({held}) "
                                     "and takes no uploads: build and flash its firmware for "
                                     "this model (inferlab board build)")
                link.load(model_bytes, progress=progress)
                uploaded = True
            if plan is not None:
                link.plan(plan)
            return link.run(inputs), uploaded
        except BaseException:
            if not link.is_open:
                self._close_link()
            raise

    def close(self) -> None:
        """Close the link and stop the virtual board and QEMU (a start under way included)."""
        with self._lock:
            self._epoch += 1
            starting = self._starting
        if starting is not None:
            _terminate(starting)  # its start then fails at once; the starter stops it
        self._close_link()
        self._stop_server()
        self._stop_emulator()
        starter, self._starter = self._starter, None
        if starter is not None:
            starter.shutdown(wait=False)

    def _start_emulator(self, choice: BoardChoice, progress) -> None:
        """Build the firmware for the choice's model and plan, start QEMU, wait for HELLO."""
        with self._lock:
            epoch = self._epoch
        name = Path(choice.model).stem
        progress(0.05, f"building the firmware for {name} ({choice.planner} plan, "
                       f"{choice.target} memory)")
        out_dir = None
        if self.images_dir is not None:
            out_dir = self.images_dir / default_out_dir(name, QEMU_TARGET, choice.target).name
        build = build_firmware(choice.model, QEMU_TARGET, choice.target, out_dir,
                               planner=choice.planner)
        progress(0.6, f"starting QEMU (mps2-an386) with {build.image.name}: flash "
                      f"{build.flash_bytes:,} B, RAM {build.ram_bytes:,} B")
        emulator = Emulator(build.image)
        with self._lock:
            if self._epoch != epoch:
                raise BoardDisconnected("the board was closed while its firmware was built")
            self._starting = emulator
            if self._starter is None:
                self._starter = ThreadPoolExecutor(1, thread_name_prefix="qemu-starter")
            starter = self._starter
        error = None
        try:
            starter.submit(emulator.start).result()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the clean-up
            error = exc
        with self._lock:
            self._starting = None
            closed = self._epoch != epoch
            if not closed and error is None:
                self.emulator, self.firmware = emulator, build
        if self.emulator is not emulator:  # failed, or closed meanwhile
            emulator.stop()
        if closed:
            raise BoardDisconnected("the board was closed while QEMU started")
        if error is not None:
            raise error

    def _close_link(self) -> None:
        link, self.link = self.link, None
        if link is not None:
            link.close()

    def _stop_server(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def _stop_emulator(self) -> None:
        with self._lock:
            emulator, self.emulator, self.firmware = self.emulator, None, None
        if emulator is not None:
            emulator.stop()


def _terminate(emulator) -> None:
    """Ask a starting emulator's QEMU to end (from another thread than its start)."""
    process = emulator.process
    if process is not None and process.poll() is None:
        process.terminate()
