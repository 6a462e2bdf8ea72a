"""Serial port discovery: pyserial's port list, with the board presets each VID/PID matches.

A USB ID often belongs to a debug probe shared by several boards (ST-LINK on every Nucleo),
so a port lists every matching preset as a candidate; `board` is set only when exactly one
matches. Ports without USB IDs (built-in UARTs, ptys) are listed with `vid`/`pid` None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from serial.tools import list_ports as serial_list_ports

from inferlab.engines.board.boards import BoardPreset, list_boards


@dataclass(frozen=True)
class PortInfo:
    device: str  # what BoardLink takes: /dev/ttyACM0, COM3
    description: str
    vid: int | None
    pid: int | None
    serial_number: str | None
    manufacturer: str | None
    candidates: tuple[str, ...]  # ids of the presets whose USB IDs match

    @property
    def board(self) -> str | None:
        return self.candidates[0] if len(self.candidates) == 1 else None

    @property
    def usb_id(self) -> str | None:
        return None if self.vid is None or self.pid is None else f"{self.vid:04x}:{self.pid:04x}"

    def to_dict(self) -> dict:
        return asdict(self) | {"board": self.board, "usb_id": self.usb_id,
                               "candidates": list(self.candidates)}


def describe_port(port, boards: list[BoardPreset]) -> PortInfo:
    """A PortInfo from one pyserial ListPortInfo (or anything with its attributes)."""
    vid, pid = getattr(port, "vid", None), getattr(port, "pid", None)
    return PortInfo(
        device=port.device,
        description=getattr(port, "description", "") or "",
        vid=vid,
        pid=pid,
        serial_number=getattr(port, "serial_number", None),
        manufacturer=getattr(port, "manufacturer", None),
        candidates=tuple(b.id for b in boards if vid is not None and b.matches_usb(vid, pid)),
    )


def list_ports() -> list[PortInfo]:
    """Serial ports on this machine, sorted by device name; an empty list when there are none."""
    boards = list_boards()
    return sorted((describe_port(p, boards) for p in serial_list_ports.comports()),
                  key=lambda p: p.device)
