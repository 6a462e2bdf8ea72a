"""Fuzzing every lab's snapshot section through its reader and its view, in-process and seeded.

A real section of each lab (tests/app/lab_sections.py) is mutated one node at a time (a value
of another type, zero, huge or non-finite numbers, a deleted field, deep nesting, a list
stretched long: tests/fuzz.py) and opened as the window opens a snapshot
(`snapshot_io.restore_labs`), then the lab's page is rendered. Each case must end in the
lab's own error, a ValueError naming the field under `labs.<id>` (what the banner shows), or a
drawn page; any other exception, in the reader, the view or a paint event, or a case past the
hang guard fails the test and names the case.
"""

from __future__ import annotations

import random
import traceback

import pytest

from inferlab.app import snapshot_io
from inferlab.app.labs.registry import LAB_IDS
from inferlab.engines.trace.snapshot import Snapshot, make_snapshot, write_snapshot
from tests.app.lab_sections import BUILDERS
from tests.fuzz import mutate_value, run_cases, sampled_paths

SEED = 20250618
CASES = {"hardware": 120, "roofline": 120, "memory": 150, "mcu": 150, "kv": 100,
         "batching": 150, "cluster": 150, "speculative": 150, "quant": 100, "attention": 150,
         "endpoint": 150, "moe": 150, "step": 120}
"""Cases per lab: every field of its section several times over (the slower pages fewer),
about 15 s for all nine on two idle cores."""


class DrawError(RuntimeError):
    """An exception raised inside Qt (a paint event, a slot) while a case was drawn."""


def snapshot_of(lab_id: str, section) -> Snapshot:
    return Snapshot(app_version="0.0", created_utc="2025-06-18T00:00:00+00:00", host={},
                    devices=(), active_lab=lab_id, labs={lab_id: section})


def test_every_lab_has_a_section_builder():
    assert set(BUILDERS) == set(LAB_IDS)


@pytest.mark.parametrize("lab_id", LAB_IDS)
def test_a_mutated_section_opens_or_is_refused_by_name(lab_id, make_window, qtbot):
    section = BUILDERS[lab_id]()
    window = make_window()
    lab = window.lab(lab_id)
    refusals = []

    def opening(snapshot):
        def call():
            with qtbot.capture_exceptions() as errors:
                try:
                    snapshot_io.restore_labs([lab], snapshot)
                except ValueError as e:
                    refusals.append(str(e))
                    raise
                lab.widget.grab()
            if errors:
                raise DrawError("".join(traceback.format_exception(*errors[0])))
        return call

    opening(snapshot_of(lab_id, section))()  # the real section opens as it is
    assert lab.read_only and not refusals

    rng = random.Random(f"{SEED}:{lab_id}")
    paths = sampled_paths(section)

    def cases():
        for _ in range(CASES[lab_id]):
            label, mutated = mutate_value(section, rng, paths)
            yield label, opening(snapshot_of(lab_id, mutated))

    result = run_cases(cases(), (ValueError,))
    print(f"{lab_id} snapshot fuzz:", result.summary())
    result.check()
    assert result.cases == CASES[lab_id]
    assert result.refused > 0 and result.ok > 0
    unnamed = [r for r in refusals if not r.startswith(f"labs.{lab_id}")]
    assert not unnamed, f"refusals that name no field of labs.{lab_id}: {unnamed[:5]}"


def test_a_bare_number_where_a_percentile_table_belongs_is_named_on_the_banner(
        make_window, tmp_path):
    """The issue's case: the batching lab is not shown, the banner says which field, and the
    rest of the snapshot opens."""
    batching = BUILDERS["batching"]()
    batching["metrics"]["ttft_s"] = 0.25
    path = tmp_path / "bad-metrics.json"
    write_snapshot(path, make_snapshot("0.0", {}, [], {"batching": batching,
                                                       "memory": BUILDERS["memory"]()}))
    window = make_window()
    window.open_snapshot(path)
    why = window.snapshot_problems["batching"]
    assert why == "labs.batching.metrics.ttft_s: expected an object, got 0.25"
    assert f"Not shown: batching</b> — {why}" in window.banner_label.text()
    assert window.lab("memory").read_only and not window.lab("batching").read_only


class _Lab:
    """A lab as restore_labs sees one; `drawing_fails`: its view refuses what its reader
    passed (a ValueError while drawing)."""

    def __init__(self, lab_id: str, drawing_fails: bool = False):
        self.lab_id, self.drawing_fails, self.read_only = lab_id, drawing_fails, False
        self.reads = 0

    def read_section(self, section):
        if section.get("bad"):
            raise ValueError(f"labs.{self.lab_id}.state.bad: expected nothing")
        self.reads += 1
        return ("record of", self.lab_id)

    def show_snapshot(self, record) -> None:
        assert record == ("record of", self.lab_id)  # what read_section made, not the dict
        self.read_only = True
        if self.drawing_fails:
            raise ValueError(f"labs.{self.lab_id}.state: cannot be drawn")

    def show_live(self) -> None:
        self.read_only = False


def test_a_section_the_drawing_refuses_is_reported_like_a_bad_field():
    labs = [_Lab("a"), _Lab("b", drawing_fails=True), _Lab("c")]
    snapshot = Snapshot("0.0", "2025-06-18T00:00:00+00:00", {}, (), "a",
                        {"a": {}, "b": {}, "c": {"bad": True}})
    restored, problems = snapshot_io.restore_labs(labs, snapshot)
    assert restored == ["a"]
    assert problems == {"b": "labs.b.state: cannot be drawn",
                        "c": "labs.c.state.bad: expected nothing"}
    assert [lab.read_only for lab in labs] == [True, False, False]  # b is back to live
    assert [lab.reads for lab in labs] == [1, 1, 0]  # each section read once
    with pytest.raises(ValueError, match="labs.b.state: cannot be drawn"):
        snapshot_io.restore_labs(labs[1:2], snapshot)
