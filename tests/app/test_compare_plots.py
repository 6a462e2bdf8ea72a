"""The labs' overlaid plots of a comparison (app/compare_plots.py): built from the registry
for the labs both snapshots hold, none for a lab on one side only or without plots, a
message naming the side and the field for a section that does not read; a toy lab gets its
plots from its entry alone; mutated sections never raise, and their plots draw."""

from __future__ import annotations

import dataclasses
import functools
import random

import numpy as np

from inferlab.app.compare_plots import lab_overlays
from inferlab.app.labs import registry
from inferlab.app.labs.registry import LABS
from inferlab.engines.trace.overlay import Curve, Plot
from inferlab.engines.trace.snapshot import Snapshot
from tests.app.lab_sections import BUILDERS
from tests.fuzz import mutate_value, run_cases, sampled_paths


@functools.cache
def section(lab: str) -> dict:
    return BUILDERS[lab]()


def snap(**labs) -> Snapshot:
    return Snapshot(app_version="0.0", created_utc="2025-06-18T00:00:00+00:00", host={},
                    devices=(), active_lab=None, labs=labs)


def test_the_labs_both_hold_with_plots_get_them_a_lab_on_one_side_none(monkeypatch):
    # a lab whose entry names no plots (every shipped lab has some): nothing for it, not an
    # empty entry; a lab on one side only is not in `labs` (Comparison.labs)
    monkeypatch.setattr(registry, "LABS", tuple(
        dataclasses.replace(spec, compare_plots=None) if spec.id == "memory" else spec
        for spec in LABS))
    a = snap(kv=section("kv"), memory=section("memory"), attention=section("attention"))
    b = snap(kv=section("kv"), memory=section("memory"))
    got = lab_overlays(a, b, ["kv", "memory"], "a.json", "b.json")
    assert [o.lab for o in got] == ["kv"]
    assert all(o.plots and not o.message for o in got)
    kv = got[0]
    assert [p.title for p in kv.plots] == ["Paged KV pool by step", "KV slots reserved by step"]
    for p in kv.plots:
        for ca, cb in zip(p.side("A"), p.side("B"), strict=True):
            assert np.array_equal(ca.y, cb.y)  # the same section on both sides
    assert lab_overlays(a, b, []) == []


def test_a_section_that_does_not_read_gets_a_message_naming_side_and_field():
    bad = {**section("kv"), "state": {**section("kv")["state"], "steps": "many"}}
    (got,) = lab_overlays(snap(kv=section("kv")), snap(kv=bad), ["kv"], "a.json", "b.json")
    assert got.plots == ()
    assert got.message.startswith("cannot draw: B (b.json): labs.kv.state.steps")
    (both,) = lab_overlays(snap(kv=bad), snap(kv=[]), ["kv"], "a.json", "b.json")
    assert "A (a.json): labs.kv.state.steps" in both.message
    assert "B (b.json): labs.kv" in both.message
    empty = {**section("kv"), "state": {}}
    (none,) = lab_overlays(snap(kv=empty), snap(kv=empty), ["kv"])
    assert none.plots == () and "nothing to draw" in none.message


def toy_plots(read) -> list[Plot]:
    """The toy lab's one plot: its count as a single point."""
    return [Plot("count", "run", "count", (Curve("count", [0], [read]),))]


def test_a_new_lab_gets_its_plots_from_its_registry_entry(monkeypatch):
    toy = registry.LabSpec(id="toy", title="Toy", summary="", description="",
                           controller="tests.app.toy_lab:ToyLab",
                           read_section="tests.app.toy_lab:read_toy_section",
                           compare_plots="tests.app.test_compare_plots:toy_plots")
    monkeypatch.setattr(registry, "LABS", (*LABS, toy))
    a, b = snap(toy={"state": {"count": 2}}), snap(toy={"state": {"count": 5}})
    from tests.app.toy_lab import read_toy_section

    assert read_toy_section({"state": {"count": 2}}) == 2  # what toy_plots is given
    (got,) = lab_overlays(a, b, ["toy"])
    (plot,) = got.plots
    assert [(c.side, c.y.tolist()) for c in plot.curves] == [("A", [2.0]), ("B", [5.0])]


PLOTTED = [spec.id for spec in LABS if spec.compare_plots]
CASES_PER_LAB = 25


def test_mutated_sections_give_plots_or_a_message_and_the_plots_draw(qtbot):
    """Each plotted lab's real section against a mutated copy of it (tests/fuzz.py): the
    overlays never raise, and what they hold draws and paints."""
    from inferlab.views.overlay_plots import LabOverlayPlots

    def case(lab, mutated):
        def call():
            (got,) = lab_overlays(snap(**{lab: section(lab)}), snap(**{lab: mutated}), [lab])
            assert got.plots or got.message
            widget = LabOverlayPlots(got)
            qtbot.addWidget(widget)
            widget.resize(900, 300 * widget.rows())
            with qtbot.capture_exceptions() as errors:
                widget.grab()
            assert not errors, errors[0][1]
        return call

    cases = []
    for lab in PLOTTED:
        rng = random.Random(f"overlay:{lab}")
        paths = sampled_paths(section(lab))
        for _ in range(CASES_PER_LAB):
            label, mutated = mutate_value(section(lab), rng, paths)
            cases.append((f"{lab}: {label}", case(lab, mutated)))
    result = run_cases(cases, allowed=())
    result.check()
    assert result.ok == len(PLOTTED) * CASES_PER_LAB
