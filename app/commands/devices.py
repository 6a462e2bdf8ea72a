"""`inferlab devices`: compute devices (and boards, once the MCU lab finds them)."""

from __future__ import annotations

from inferlab.app.cli import print_json
from inferlab.engines.board.ports import list_ports
from inferlab.engines.hardware.discovery import discover_devices


def register(sub) -> None:
    p = sub.add_parser("devices", help="list compute devices and boards")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:

    devices = [d.to_dict() for d in discover_devices()]
    boards = [p.to_dict() for p in list_ports()]
    if args.json:
        print_json({"devices": devices, "boards": boards})
        return 0
    for d in devices:
        gib = d["memory_bytes"] / 2**30
        print(f"{d['id']:8} {d['kind']:5} {d['name']}  ({d.get('cores')} cores, {gib:.1f} GiB)")
    for b in boards:
        print(f"board    {b['device']}  {b['description']}  {b.get('usb_id') or ''}  {b.get('board') or ''}")
    if not boards:
        print("boards: none (no serial ports)")
    return 0
