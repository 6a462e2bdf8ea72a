"""The speculative lab: the window shows it, it steps and runs to the end on the tiny model,
exports a snapshot that reopens read-only, hovering a token names its p and q, and
`inferlab screenshot --lab speculative` renders."""

from __future__ import annotations

import json

import pytest

from inferlab.app.labs.speculative import AUTO_STEPS
from inferlab.engines.speculative.verification import TokenFate
from tests.app import lab_helpers
from tests.app.lab_helpers import wait_idle


def open_lab(qtbot, make_window, **settings):
    return lab_helpers.open_lab(qtbot, make_window, "speculative", 120000, **settings)


def test_lab_steps_runs_exports_and_reopens_read_only(qtbot, make_window, tmp_path):
    window, lab = open_lab(qtbot, make_window, max_tokens=40, k=3)
    assert window.current_lab() is lab
    assert len(lab.records) == AUTO_STEPS or lab.session.done
    n = len(lab.records)
    if not lab.session.done:
        lab.view.step_button.click()
        qtbot.waitUntil(lambda: len(lab.records) == n + 1, timeout=60000)
        wait_idle(qtbot, window, 120000)
    lab.view.run_button.click()
    qtbot.waitUntil(lambda: lab.session.done, timeout=120000)
    wait_idle(qtbot, window, 120000)
    lab.flush()
    view = lab.view
    assert [r.index for r in lab.records] == list(range(len(lab.records)))
    assert sum(len(r.token_ids) for r in lab.records) == 40
    assert view.steps is lab.records
    assert view.stats.item(0, 1).text() == str(len(lab.records))
    assert "40 tokens in" in view.status.text()
    html = view.stream.toHtml()
    assert "#009e73" in html.lower() or any(f is TokenFate.BONUS for r in lab.records
                                            for f in r.fates)
    bars = view.bars.opts["height"]
    assert len(bars) == len(view.metrics["acceptance_rate_by_position"])
    assert view.theory_legend.items[0][1].text.endswith("K = 3")
    # a token's hover text: its fate, p and (for a draft) q
    step = next(r for r in lab.records if r.token_ids)
    text = view.describe(f"tok:{step.index}:0:{step.fates[0].value}")
    assert f"p = {step.p[0]:.3f}" in text
    accepted = [r for r in lab.records if r.n_accepted]
    if accepted:
        assert "q = " in view.describe(f"tok:{accepted[0].index}:0:accepted")

    path = window.export_snapshot(tmp_path / "speculative.json")
    raw = json.loads(path.read_text())
    section = raw["inferlab"]["labs"]["speculative"]
    assert len(section["state"]["steps"]) == len(lab.records)
    assert section["metrics"]["tokens"] == 40
    names = [e.get("name", "") for e in raw["traceEvents"]]
    assert sum(n.startswith("step ") for n in names) == len(lab.records)
    assert names.count("draft") == names.count("verify") == len(lab.records)

    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    replay = other.lab("speculative")
    assert replay.read_only and not replay.view.step_button.isEnabled()
    assert list(replay.view.steps) == lab.records
    assert replay.view.stream.toPlainText() == view.stream.toPlainText()
    assert replay.view.stats.item(2, 1).text() == view.stats.item(2, 1).text()
    replay.view.slider.setValue(0)  # replay the first step
    assert replay.view.index == 0 and replay.view.step_label.text().startswith("step 0 ")
    other.show_live()
    assert not replay.read_only


def test_a_new_drafter_resets_the_run_and_a_bad_one_is_named(qtbot, make_window):
    window, lab = open_lab(qtbot, make_window, max_tokens=12)
    view = lab.view
    view.drafter.setCurrentIndex(view.drafter.findData("layerskip"))
    qtbot.waitUntil(lambda: lab.session is not None
                    and lab.session.settings["drafter"] == "layerskip:1", timeout=120000)
    wait_idle(qtbot, window, 120000)
    assert lab.header.drafter == "layerskip:1" and view.layers.isEnabled()
    assert view.layers.maximum() == 1  # the tiny target has 2 layers
    view.prompt_edit.setPlainText("   ")
    view.use_prompt.click()
    wait_idle(qtbot, window, 120000)
    assert "prompt" in view.status.text() and "#B71C1C" in view.status.styleSheet()


@pytest.mark.slow  # a whole-window screenshot
def test_screenshot_of_the_lab(capsys, tmp_path):
    from PySide6.QtGui import QImage

    from inferlab.app.cli import main

    png = tmp_path / "speculative.png"
    assert main(["screenshot", "--lab", "speculative", "--out", str(png)]) == 0
    image = QImage(str(png))
    assert (image.width(), image.height()) == (1280, 800)


def test_the_k_sweep_runs_draws_and_replays(qtbot, make_window, tmp_path):
    from inferlab.engines.labs.speculative.sweep import DEFAULT_KS
    from inferlab.engines.speculative.statistics import break_even_alpha

    window, lab = open_lab(qtbot, make_window, max_tokens=16, drafter="tiny")
    panel = lab.view.sweep_panel
    panel.sweep_button.click()
    assert not panel.sweep_button.isEnabled() and panel.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: lab.sweep is not None, timeout=120000)
    wait_idle(qtbot, window, 120000)
    xs, ys = panel.measured.getData()
    assert list(xs) == list(DEFAULT_KS) and all(y > 0 for y in ys)
    assert "best K =" in panel.note.text() and "equal plain greedy" in panel.note.text()
    best = max(lab.sweep.points, key=lambda p: p.speedup_wall)  # where the best K pays
    need = break_even_alpha(best.k, best.cost_ratio, max(1.0, best.verify_cost_ratio or 1.0))
    assert (f"pays above α = {need:.2f}" if need is not None else "no acceptance pays") \
        in panel.note.text()
    assert f"α is <b>{best.alpha:.2f}</b>" in panel.note.text()
    assert panel.sweep_button.isEnabled()
    path = window.export_snapshot(tmp_path / "sweep.json")
    section = json.loads(path.read_text())["inferlab"]["labs"]["speculative"]
    assert [p["k"] for p in section["state"]["sweep"]["points"]] == list(DEFAULT_KS)
    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    replay = other.lab("speculative").view.sweep_panel
    assert list(replay.measured.getData()[1]) == list(ys)
    assert not replay.sweep_button.isEnabled()
    section["state"]["sweep"]["points"][0]["speedup_wall"] = "fast"
    import pytest

    from inferlab.engines.labs.speculative.section import read_speculative_section

    with pytest.raises(ValueError, match=r"state.sweep.points\[0\].speedup_wall"):
        read_speculative_section(section)


def test_token_trees_in_the_lab_draw_and_hover(qtbot, make_window):
    window, lab = open_lab(qtbot, make_window, max_tokens=40, k=3, tree_width=3)
    view = lab.view
    assert lab.session.settings["tree_width"] == 3
    assert "token trees of width 3" in view.status.text()
    view.set_settings(lab.settings())
    assert view.tree_width.value() == 3 and view.tree_width.isEnabled()
    lab.view.run_button.click()
    qtbot.waitUntil(lambda: lab.session.done, timeout=120000)
    wait_idle(qtbot, window, 120000)
    lab.flush()
    branched = [r for r in lab.records if len(r.tree_tokens) > len(r.drafted)]
    assert branched and f"tree:{branched[0].index}" in view.stream.toHtml()
    text = view.describe(f"tree:{branched[0].index}")
    assert text.startswith("<pre") and f"a token tree of {len(branched[0].tree_tokens)} " \
        "nodes" in text and text.count("✓") == branched[0].n_accepted
    assert view.describe("tree:9999") == ""
    view.drafter.setCurrentIndex(view.drafter.findData("layerskip"))  # trees are ngram's
    assert not view.tree_width.isEnabled() and view.settings()["tree_width"] == 1
    assert lab.valid_settings(view.settings() | {"tree_width": 4})["tree_width"] == 1


def test_a_skip_set_named_by_hand_shows_in_the_menu_and_skip_auto_says_why_not(
        qtbot, make_window):
    window, lab = open_lab(qtbot, make_window, max_tokens=12)
    view = lab.view
    view.set_settings(dict(view.settings(), drafter="skip:1"))
    assert view.drafter.currentData() == "skip:1" and view.settings()["drafter"] == "skip:1"
    assert "skip self-draft (1)" in view.drafter.currentText()
    view.settings_changed.emit(view.settings())  # as an edit in the form does
    qtbot.waitUntil(lambda: lab.session is not None
                    and lab.session.settings["drafter"] == "skip:1", timeout=120000)
    wait_idle(qtbot, window, 120000)
    assert lab.header.drafter == "skip:1" and not view.layers.isEnabled()
    view.drafter.setCurrentIndex(view.drafter.findData("skip:auto"))
    # the tiny target's 2 layers leave none in between to skip: the status says so in red
    qtbot.waitUntil(lambda: "intermediate" in view.status.text(), timeout=120000)
    assert "#B71C1C" in view.status.styleSheet()


def test_a_section_reads_into_a_frozen_record_the_lab_draws(qtbot, make_window):
    """A headless run's section with a K sweep (tests/app/lab_sections.py) reads once into a
    `SpeculativeSnapshot` holding the sweep too; `show_snapshot` draws the steps and the
    sweep from that record alone."""
    import dataclasses

    from inferlab.engines.labs.speculative.records import SpeculativeSnapshot
    from inferlab.engines.labs.speculative.section import read_speculative_section
    from tests.app.lab_sections import speculative

    section = speculative()
    read = read_speculative_section(section)
    assert isinstance(read, SpeculativeSnapshot)
    assert read.settings["model"] == "tiny" and read.header.k == 3
    assert [s.index for s in read.steps] == list(range(len(section["state"]["steps"])))
    assert sum(len(s.token_ids) for s in read.steps) == read.metrics["tokens"] == 10
    assert [p.k for p in read.sweep.points] == [3, 5] and read.sweep.model == "tiny"
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.sweep = None

    window = make_window()
    lab = window.lab("speculative")
    lab.show_snapshot(read)
    assert lab.read_only and list(lab.view.steps) == list(read.steps)
    assert lab.view.status.text().startswith("Read-only snapshot: tiny, ngram drafter, K = 3")
    assert list(lab.view.sweep_panel.measured.getData()[0]) == [3, 5]


def test_the_eagle_drafter_is_in_the_menu_and_round_trips(qtbot, make_window):
    window, lab = open_lab(qtbot, make_window, max_tokens=12)
    view = lab.view
    view.set_settings(dict(view.settings(), drafter="eagle"))
    assert view.drafter.currentText() == "EAGLE head"
    assert view.settings()["drafter"] == "eagle"
    wait_idle(qtbot, window, 120000)


def test_eagle_trees_and_medusa_heads_in_the_form(qtbot, make_window):
    """The tree width is the n-gram and EAGLE drafters' (EAGLE-2 trees), kept through the
    lab's settings; Medusa heads are in the menu and round-trip."""
    window, lab = open_lab(qtbot, make_window, max_tokens=12)
    view = lab.view
    view.set_settings(dict(view.settings(), drafter="eagle", tree_width=3))
    assert view.tree_width.isEnabled()
    assert view.settings()["tree_width"] == 3
    assert lab.valid_settings(view.settings())["tree_width"] == 3
    view.set_settings(dict(view.settings(), drafter="medusa", tree_width=3))
    assert view.drafter.currentText() == "Medusa heads"
    assert not view.tree_width.isEnabled()
    assert view.settings()["drafter"] == "medusa" and view.settings()["tree_width"] == 1
    assert lab.valid_settings(dict(view.settings(), tree_width=3))["tree_width"] == 1
    wait_idle(qtbot, window, 120000)
