"""The Connect board… dialog: a serial port (with the boards their USB IDs name), a URL, a
virtual board or the emulated Cortex-M4; it returns a `BoardChoice` for the board session
(`engines.board.session`)."""

from __future__ import annotations

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

from inferlab.engines.board.ports import list_ports
from inferlab.engines.board.session import (
    EMULATED,
    FIRMWARE_PLANNER,
    PORT,
    VIRTUAL,
    BoardChoice,
    emulator_missing,
    firmware_planner,
)

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
