"""A snapshot written before the redesign of issue 40 still opens, every lab of it.

`data/snapshot-before-redesign.json` was written by InferLab at commit 29556da (the last
before the redesign) from tests/app/lab_sections.py's builders of that commit: every lab's
section as the window exported it then. It is never regenerated: it is what users' files
look like.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from inferlab.app.labs.registry import LAB_IDS, lab_spec, resolve
from inferlab.engines.trace.snapshot import read_snapshot

BEFORE = Path(__file__).parent / "data" / "snapshot-before-redesign.json"
SINCE = ("moe", "step")
"""Labs added after the redesign: the file has no section of theirs."""
THEN = tuple(lab_id for lab_id in LAB_IDS if lab_id not in SINCE)


def test_it_holds_every_lab_of_its_time():
    assert set(read_snapshot(BEFORE).labs) == set(THEN)


@pytest.mark.parametrize("lab_id", THEN)
def test_each_section_reads_once_into_a_frozen_record(lab_id):
    section = read_snapshot(BEFORE).labs[lab_id]
    record = resolve(lab_spec(lab_id).read_section)(section)
    assert dataclasses.is_dataclass(record) and not isinstance(record, type)
    field = dataclasses.fields(record)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, field, None)


def test_the_window_shows_every_lab_of_it_read_only(make_window):
    window = make_window()
    window.open_snapshot(BEFORE)
    assert window.snapshot_problems == {}
    assert all(window.lab(lab_id).read_only for lab_id in THEN)
