"""Connecting the MCU lab to a board: the session (link + an in-process virtual board or an
emulated one on QEMU) and the Connect board… dialog that picks a serial port, a URL, a
virtual board or the emulated Cortex-M4.

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

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
)

from inferlab.engines.mcu.link import BoardDisconnected, BoardError, BoardLink

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
    from inferlab.engines.mcu.planners import PLANNERS

    if planner in PLANNERS:
        return planner, ""
    return FIRMWARE_PLANNER, (f"the {planner} plan reorders, aliases or patches, which the "
                              f"firmware cannot hold: it is built with {FIRMWARE_PLANNER}")


def emulator_missing() -> str:
    """"" when QEMU and the Arm cross compiler are installed, else what is missing and the
    exact command that installs it."""
    from inferlab.engines.mcu.emulator import find_qemu
    from inferlab.engines.mcu.toolchain import QEMU_TARGET, ToolMissing, require_tools

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
        tooling's own folder under firmware/build/images)."""
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
                from inferlab.engines.mcu.virtual_board import serve

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
        from inferlab.engines.mcu.emulator import Emulator
        from inferlab.engines.mcu.toolchain import QEMU_TARGET, build_firmware, default_out_dir

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


ROLE = 0x0100  # Qt.UserRole: (kind, target) of a list entry


class ConnectDialog(QDialog):
    """Serial ports (with the boards their USB IDs name), a URL, a virtual board, or the
    emulated Cortex-M4 running the firmware for `model` (a .tflite path) and `planner`."""

    def __init__(self, boards, default_board: str, parent=None, model: str = "",
                 planner: str = FIRMWARE_PLANNER):
        super().__init__(parent)
        self.setWindowTitle("Connect board")
        self.resize(620, 380)
        self.model = model
        self.firmware_planner, self.planner_note = firmware_planner(planner)
        self.list = QListWidget()
        self.virtual_board = QComboBox()
        self.virtual_board.setToolTip("The virtual board's preset, and the SRAM and flash the "
                                      "emulated board's firmware is linked for")
        for board_id, label in boards:
            self.virtual_board.addItem(label, board_id)
        index = self.virtual_board.findData(default_board)
        if index >= 0:
            self.virtual_board.setCurrentIndex(index)
        self.url = QLineEdit()
        self.url.setPlaceholderText("or a pyserial URL: socket://127.0.0.1:5555, /dev/ttyACM0, COM3")
        refresh = QPushButton("Refresh ports")
        refresh.clicked.connect(self.refresh)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #555")
        self.note.setTextInteractionFlags(Qt.TextSelectableByMouse)  # the install command

        virtual_row = QHBoxLayout()
        virtual_row.addWidget(QLabel("Board preset (virtual, emulated):"))
        virtual_row.addWidget(self.virtual_board, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Connect")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addWidget(QLabel("Connect to:"))
        col.addWidget(self.list, 1)
        col.addLayout(virtual_row)
        col.addWidget(self.url)
        bottom = QHBoxLayout()
        bottom.addWidget(refresh)
        bottom.addWidget(self.note, 1)
        col.addLayout(bottom)
        col.addWidget(buttons)
        self.list.itemDoubleClicked.connect(lambda _item: self.accept())
        self.refresh()

    def refresh(self) -> None:
        from inferlab.engines.mcu.ports import list_ports

        self.list.clear()
        virtual = QListWidgetItem("Virtual board (in-process), the preset below")
        virtual.setToolTip("The board protocol served by this app on a local socket: it runs "
                           "the arena interpreter within the preset's SRAM and flash")
        virtual.setData(ROLE, (VIRTUAL, ""))
        self.list.addItem(virtual)
        self.list.addItem(self._emulated_item())
        notes = []
        try:
            ports = list_ports()
        except Exception as exc:  # noqa: BLE001 - a broken port enumeration is shown, not fatal
            ports = []
            notes.append(f"Could not list serial ports: {exc}")
        else:
            notes.append(f"{len(ports)} serial port(s) found." if ports else
                         "No serial ports found: plug a board in and refresh, or use the "
                         "virtual or emulated board.")
        if self.emulator_missing:
            notes.append(f"Emulated board unavailable: {self.emulator_missing}")
        elif self.model and self.planner_note:
            notes.append(f"Emulated board: {self.planner_note}.")
        self.note.setText(" ".join(notes))
        for port in ports:
            who = port.board or (" or ".join(port.candidates) if port.candidates else "")
            text = f"{port.device} — {port.description}" + (f" [{port.usb_id}]" if port.usb_id else "")
            item = QListWidgetItem(text + (f" → {who}" if who else ""))
            item.setData(ROLE, (PORT, port.device))
            self.list.addItem(item)
        self.list.setCurrentRow(0)

    def _emulated_item(self) -> QListWidgetItem:
        """'Emulated Cortex-M4 (QEMU)': enabled when QEMU, the cross compiler and a model are
        there; otherwise disabled, saying why (with the install command)."""
        self.emulator_missing = emulator_missing()
        name = Path(self.model).stem
        text = "Emulated Cortex-M4 (QEMU)"
        if self.emulator_missing:
            text += " — not installed"
            tip = self.emulator_missing
        elif not self.model:
            text += " — no model chosen"
            tip = "Choose a model in the lab first: the firmware is built for it"
        else:
            text += f": firmware for {name}, {self.firmware_planner} plan, the preset below"
            tip = (f"Compiles {name} and its {self.firmware_planner} plan into the C firmware "
                   "(arm-none-eabi-gcc), starts QEMU's mps2-an386 (Cortex-M4) with the preset "
                   "below's SRAM and flash, and connects over TCP like a board on a serial "
                   "port. Per-op times come from the firmware's SysTick; QEMU runs with "
                   "-icount, so they count guest instructions (0.8 cycles each at 25 MHz), "
                   "not a real chip's time."
                   + (f" Note: {self.planner_note}." if self.planner_note else ""))
        item = QListWidgetItem(text)
        item.setToolTip(tip)
        item.setData(ROLE, (EMULATED, ""))
        if self.emulator_missing or not self.model:
            item.setFlags(item.flags() & ~(Qt.ItemIsEnabled | Qt.ItemIsSelectable))
        return item

    def choice(self) -> BoardChoice | None:
        """What the user picked (a typed URL wins over the list)."""
        url = self.url.text().strip()
        if url:
            return BoardChoice(PORT, url)
        item = self.list.currentItem()
        if item is None or not item.flags() & Qt.ItemIsEnabled:
            return None
        kind, target = item.data(ROLE)
        if kind == VIRTUAL:
            return BoardChoice(VIRTUAL, self.virtual_board.currentData())
        if kind == EMULATED:
            return BoardChoice(EMULATED, self.virtual_board.currentData(), self.model,
                               self.firmware_planner)
        return BoardChoice(PORT, target)
