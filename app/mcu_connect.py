"""Connecting the MCU lab to a board: the session (link + optional in-process virtual board)
and the Connect board… dialog that picks a serial port, a URL or a virtual board.

`BoardSession` does blocking serial I/O: the lab calls it from worker tasks, one at a time.
Every failure is a `BoardError` (an OSError) with a one-line message; after one the session
can connect again (a killed virtual board is started afresh).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

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

from engines.mcu.link import BoardDisconnected, BoardLink

VIRTUAL = "virtual"
PORT = "port"


@dataclass(frozen=True)
class BoardChoice:
    """What to connect to: a virtual board of preset `target`, or a pyserial URL."""

    kind: str  # VIRTUAL or PORT
    target: str  # board preset id, or URL

    def label(self) -> str:
        return f"virtual {self.target} (in-process)" if self.kind == VIRTUAL else self.target


class BoardSession:
    """One board connection at a time; `connect`, `run` and `close` may be called again."""

    def __init__(self, timeout_s: float = 2.0):
        self.timeout_s = timeout_s
        self.choice: BoardChoice | None = None
        self.link: BoardLink | None = None
        self.server = None  # the in-process virtual board's BoardServer
        self.info = None

    @property
    def connected(self) -> bool:
        return self.link is not None and self.link.is_open

    @property
    def url(self) -> str:
        return self.link.url if self.link is not None else ""

    def connect(self, choice: BoardChoice | None = None):
        """Open the link (starting the virtual board first if needed) and ask HELLO."""
        choice = choice or self.choice
        if choice is None:
            raise BoardDisconnected("no board chosen: use Connect board…")
        self._close_link()
        if choice.kind == VIRTUAL:
            if self.server is None or not self.server.running or self.choice != choice:
                self._stop_server()
                from engines.mcu.virtual_board import serve

                self.server = serve(choice.target, "socket")
            url = self.server.url
        else:
            self._stop_server()
            url = choice.target
        self.choice = choice
        self.link = BoardLink(url, timeout_s=self.timeout_s)
        try:
            self.info = self.link.hello()
        except BaseException:
            self._close_link()
            raise
        return self.info

    def run(self, model_bytes: bytes, plan, inputs: bytes, progress=None):
        """Upload the model when the board holds another, send `plan`, run `inputs`.

        Returns (BoardResult, uploaded). A lost connection closes the link (BoardDisconnected).
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
        self._close_link()
        self._stop_server()

    def _close_link(self) -> None:
        link, self.link = self.link, None
        if link is not None:
            link.close()

    def _stop_server(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()


class ConnectDialog(QDialog):
    """Serial ports (with the boards their USB IDs name), a URL, or a virtual board."""

    def __init__(self, boards, default_board: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Connect board")
        self.resize(560, 360)
        self.list = QListWidget()
        self.virtual_board = QComboBox()
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

        virtual_row = QHBoxLayout()
        virtual_row.addWidget(QLabel("Virtual board preset:"))
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
        from engines.mcu.ports import list_ports

        self.list.clear()
        virtual = QListWidgetItem("Virtual board (in-process), the preset below")
        virtual.setToolTip("The board protocol served by this app on a local socket: it runs "
                           "the arena interpreter within the preset's SRAM and flash")
        virtual.setData(0x0100, (VIRTUAL, ""))
        self.list.addItem(virtual)
        try:
            ports = list_ports()
        except Exception as exc:  # noqa: BLE001 - a broken port enumeration is shown, not fatal
            ports = []
            self.note.setText(f"Could not list serial ports: {exc}")
        else:
            self.note.setText(f"{len(ports)} serial port(s) found." if ports else
                              "No serial ports found: plug a board in and refresh, or use the "
                              "virtual board.")
        for port in ports:
            who = port.board or (" or ".join(port.candidates) if port.candidates else "")
            text = f"{port.device} — {port.description}" + (f" [{port.usb_id}]" if port.usb_id else "")
            item = QListWidgetItem(text + (f" → {who}" if who else ""))
            item.setData(0x0100, (PORT, port.device))
            self.list.addItem(item)
        self.list.setCurrentRow(0)

    def choice(self) -> BoardChoice | None:
        """What the user picked (a typed URL wins over the list)."""
        url = self.url.text().strip()
        if url:
            return BoardChoice(PORT, url)
        item = self.list.currentItem()
        if item is None:
            return None
        kind, target = item.data(0x0100)
        if kind == VIRTUAL:
            return BoardChoice(VIRTUAL, self.virtual_board.currentData())
        return BoardChoice(PORT, target)
