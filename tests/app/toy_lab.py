"""A made-up lab for the registry test: everything a lab provides, in one small module.

It stands in for engine package + view + controller; the registry test adds ONE `LabSpec`
naming these and checks that the window, the CLI and snapshots all pick it up.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

from inferlab.app.labs.base import Lab
from inferlab.engines.trace.snapshot import lab_section, section_field


def read_toy_section(section: dict) -> int:
    count = section_field(section_field(section, "state", "labs.toy"), "count", "labs.toy.state")
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"labs.toy.state.count: expected a count >= 0, got {count!r}")
    return count


def add_arguments(parser) -> None:
    parser.add_argument("--count", type=int, default=3)


def run(args, recorder):
    with recorder.span("toy run", cat="toy"):
        section = lab_section({"count": args.count}, {"count": args.count}, {"count": args.count})
    return section, section["metrics"]


def bench() -> dict:
    return {"toy_ratio": 1.0}


class ToyLab(Lab):
    lab_id = "toy"

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.widget = QLabel("toy lab: live")
        self.count = 0

    def snapshot_section(self) -> dict:
        return lab_section({}, {"count": self.count}, {})

    def show_snapshot(self, record: int) -> None:
        self.count = record
        self.read_only = True
        self.widget.setText(f"toy lab: snapshot with count {self.count}")
