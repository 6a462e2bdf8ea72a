"""The MoE lab: the window shows it, its worker decodes the tiny MoE at batch B and the view
receives each step's records, the B sweep follows, a new setting starts again, a snapshot
reopens read-only, and `inferlab screenshot --lab moe` renders."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from inferlab.views.moe_routing import heat_codes
from tests.app import lab_helpers
from tests.app.lab_helpers import wait_idle

SETTINGS = {"batch": 4, "prompts": 4, "steps": 3, "sweep": [1, 4]}


def open_lab(qtbot, make_window, **settings):
    return lab_helpers.open_lab(qtbot, make_window, "moe", 120000, **(SETTINGS | settings))


def test_lab_decodes_sweeps_exports_and_reopens_read_only(qtbot, make_window, tmp_path):
    window, lab = open_lab(qtbot, make_window)
    assert window.current_lab() is lab and lab.session.done
    lab.flush()
    view = lab.view
    assert [r.step for r in lab.records] == [0, 1, 2]
    assert all(r.batch == 4 and sum(lab.records[0].expert_counts[0]) == 4 * 2
               for r in lab.records)
    assert view.steps is lab.records and view.info.n_experts == 8
    last = lab.records[-1]
    top = max(max(row) for row in last.expert_counts)
    assert np.array_equal(view.heat.image.image, heat_codes(last.expert_counts, top))
    assert view.imbalance.heights.tolist() == list(last.imbalance_max_over_mean)
    # the sweep: B = 1 decoded anew, B = 4 the run's own steps
    assert [p.batch for p in lab.sweep] == [1, 4]
    own = statistics.fmean(statistics.fmean(r.distinct_experts) for r in lab.records)
    assert lab.sweep[1].distinct_experts == pytest.approx(own)
    assert view.sweep_bytes.measured.getData()[0].tolist() == [0.0, 2.0]
    assert view.formulas.pairs and "E · (1 − (1 − k/E)^B)" in view.formulas.pairs[0][0]
    assert "3 of 3 steps" in view.status.text()

    path = window.export_snapshot(tmp_path / "moe.json")
    raw = json.loads(path.read_text())
    section = raw["inferlab"]["labs"]["moe"]
    assert len(section["state"]["steps"]) == 3 and len(section["state"]["sweep"]) == 2
    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    replay = other.lab("moe")
    assert replay.read_only and not replay.view.step_button.isEnabled()
    assert not replay.view.batch.isEnabled()
    assert list(replay.view.steps) == lab.records
    assert list(replay.view.sweep) == lab.sweep
    assert replay.view.formulas.pairs[0] == view.formulas.pairs[0]
    assert np.array_equal(replay.view.heat.image.image, view.heat.image.image)
    replay.view.slider.setValue(0)
    assert replay.view.index == 0 and replay.view.step_label.text().startswith("step 0 ")
    assert "Read-only snapshot: 3 decode steps" in replay.view.status.text()
    other.show_live()
    assert not replay.read_only


def test_a_new_batch_decodes_again_and_a_dense_model_is_named(qtbot, make_window):
    window, lab = open_lab(qtbot, make_window, sweep=[])
    view = lab.view
    view.set_settings(lab.settings())  # open_lab set the lab's settings behind the view's back
    view.batch.setValue(2)
    view.batch.editingFinished.emit()
    qtbot.waitUntil(lambda: bool(lab.records) and lab.records[-1].batch == 2
                    and lab.session is not None and lab.session.done, timeout=120000)
    wait_idle(qtbot, window, 120000)
    assert len(lab.records) == 3 and not lab.current_sweep() and not view.sweep
    lab.open_model("tiny")  # a dense model: refused by name, in the status line
    qtbot.waitUntil(lambda: "dense model" in view.status.text(), timeout=120000)
    wait_idle(qtbot, window, 120000)


@pytest.mark.slow  # a whole-window screenshot
def test_screenshot_of_the_lab(tmp_path):
    from PySide6.QtGui import QImage

    from inferlab.app.cli import main

    png = tmp_path / "moe.png"
    assert main(["screenshot", "--lab", "moe", "--out", str(png)]) == 0
    image = QImage(str(png))
    assert (image.width(), image.height()) == (1280, 800)
