"""The MoE lab's view draws records built here (no engine run): the heat map's image is the
counts scaled to its lookup table, one ImageItem with a colour bar in tokens; the imbalance,
experts-touched and timing bars are the records' numbers; the run scope sums the steps; the
B sweep sits on log₂ B; the closed forms show as given."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
import pytest

from inferlab.engines.labs.moe.records import BatchPoint, MoERunInfo, MoEStepRecord
from inferlab.views.moe_routing import HEAT_LUT, heat_codes, imbalance
from inferlab.views.moe_sweep import MIB
from inferlab.views.moe_view import MoEView, parse_sweep

INFO = MoERunInfo(model="tiny-moe", model_name="tiny MoE", family="qwen3_moe",
                  kernel_path="native", weight_format="fp32", n_layers=3, moe_layers=(1, 2),
                  n_experts=4, top_k=2, params_total=1000, params_active=400,
                  weight_bytes_total=4000, dense_bytes=800, expert_bytes=[400, 400])


def step(i: int, counts, grouped_s=0.002, per_token_s=0.006) -> MoEStepRecord:
    batch = sum(counts[0]) // INFO.top_k
    return MoEStepRecord(
        step=i, batch=batch, expert_counts=counts,
        topk_weight_mean=[[0.7, 0.3], [0.6, 0.4]],
        topk_weight_hist=[0, 1, 2, 3, 2, 1, 3, 2, 1, 1],
        imbalance_max_over_mean=[float(imbalance(counts)[0]), float(imbalance(counts)[1])],
        distinct_experts=[sum(c > 0 for c in row) for row in counts],
        distinct_experts_formula=3.25, weight_bytes_per_step=2000,
        weight_bytes_per_step_formula=2100.0, step_s=0.01, grouped_s=grouped_s,
        per_token_s=per_token_s, grouped_max_abs_diff=0.0)


STEPS = [step(0, [[3, 1, 0, 4], [2, 2, 2, 2]]), step(1, [[0, 0, 8, 0], [1, 3, 3, 1]])]


@pytest.fixture
def view(qtbot):
    v = MoEView()
    qtbot.addWidget(v)
    v.resize(1100, 700)
    v.show()
    return v


def test_the_heat_map_is_one_image_of_the_counts_scaled_to_its_lut(view):
    view.draw(INFO, STEPS)
    heat = view.heat
    counts = np.array(STEPS[1].expert_counts)
    assert heat.image.image.dtype == np.uint8
    assert np.array_equal(heat.image.image, np.round(counts * 255 / 8).astype(np.uint8))
    assert np.array_equal(heat.codes, heat_codes(counts, 8))
    assert heat.image.lut is HEAT_LUT and len(HEAT_LUT) <= 256
    assert tuple(heat.image.levels) == (0, 255)
    assert [i for i in heat.plot.items if isinstance(i, pg.ImageItem)] == [heat.image]
    assert heat.bar.levels() == (0, 8)
    assert heat.bar.getAxis("left").labelText == "tokens"
    assert heat.plot.getAxis("bottom").labelText == "expert"
    assert heat.plot.getAxis("left").labelText == "MoE layer"
    assert [t for t, _ in heat.plot.getAxis("left")._tickLevels[0]] == [0.5, 1.5]
    assert [s for _, s in heat.plot.getAxis("left")._tickLevels[0]] == ["1", "2"]
    shown = [t.toPlainText() for t in heat.texts if t.isVisible()]
    assert shown == [str(c) for c in counts.ravel()]
    assert "step 1" in heat.plot.titleLabel.text


def test_the_bars_are_the_records_numbers(view):
    view.draw(INFO, STEPS)
    r = STEPS[1]
    assert view.imbalance.heights.tolist() == list(r.imbalance_max_over_mean)
    assert view.imbalance.ideal.value() == 1.0
    assert view.distinct.heights.tolist() == [1, 4]
    assert view.distinct.formula.value() == pytest.approx(3.25)
    assert view.distinct.every.value() == INFO.n_experts
    assert view.times.heights_ms.tolist() == pytest.approx([2.0, 6.0])
    assert view.times.speedup.toPlainText() == "grouped 3.00× faster"
    assert view.topk.heights.tolist() == list(r.topk_weight_hist)
    assert [line.value() for line in view.topk.ranks] == pytest.approx([0.65, 0.35])
    assert view.step_label.text().startswith("step 1 / 1: 4 tokens")


def test_the_run_scope_sums_the_steps_up_to_the_one_shown(view):
    view.draw(INFO, STEPS)
    view.scope.setCurrentIndex(view.scope.findData("run"))
    total = np.array(STEPS[0].expert_counts) + np.array(STEPS[1].expert_counts)
    assert np.array_equal(view.heat.image.image, heat_codes(total, total.max()))
    assert view.imbalance.heights.tolist() == pytest.approx(
        (total.max(axis=1) / total.mean(axis=1)).tolist())
    assert view.topk.heights.tolist() == [2 * h for h in STEPS[0].topk_weight_hist]
    assert "steps 0–1" in view.heat.plot.titleLabel.text
    view.slider.setValue(0)  # the slider shows step 0: its own counts
    assert np.array_equal(view.heat.image.image, heat_codes(STEPS[0].expert_counts, 4))
    assert view.distinct.heights.tolist() == [3, 4]


def test_the_sweep_is_drawn_on_log2_b_measured_beside_the_formula(view):
    points = [BatchPoint(batch=b, steps=2, distinct_experts=d, distinct_experts_formula=d,
                         weight_bytes_per_step=w * MIB, weight_bytes_per_step_formula=w * MIB + 1,
                         step_s=0.001 * b, tokens_per_s=1000.0, grouped_s=0.0005 * b,
                         per_token_s=0.001 * b)
              for b, d, w in ((1, 1.0, 2.0), (4, 2.5, 3.0), (16, 3.9, 3.8))]
    view.draw_sweep(points, INFO)
    view.draw(INFO, STEPS)
    x, y = view.sweep_bytes.measured.getData()
    assert x.tolist() == [0.0, 2.0, 4.0] and y.tolist() == [2.0, 3.0, 3.8]
    assert view.sweep_bytes.total.value() == INFO.weight_bytes_total / MIB
    assert view.sweep_bytes.dense.value() == INFO.dense_bytes / MIB
    ticks = view.sweep_bytes.getPlotItem().getAxis("bottom")._tickLevels[0]
    assert ticks == [(0.0, "1"), (2.0, "4"), (4.0, "16")]
    assert view.sweep_times.step.getData()[1].tolist() == pytest.approx([1.0, 4.0, 16.0])
    assert "log₂" in view.sweep_times.getPlotItem().getAxis("bottom").labelText
    assert view.facts.item(view.facts.rowCount() - 1, 0).text() == "sweep, B = 16"


def test_formulas_settings_and_clear(view, qtbot):
    view.show_formulas([("E · (1 − (1 − k/E)^B)", "4 · (1 − (1 − 2/4)^4) = 3.750")])
    assert "3.750" in view.formulas.panel.text() and "E · (1" in view.formulas.panel.text()
    s = {"model": "tiny-moe", "batch": 8, "prompts": 5, "steps": 3, "sweep": [1, 8],
         "kernels": "torch"}
    view.set_settings(s)
    assert view.settings() == s
    with qtbot.waitSignal(view.settings_changed) as got:
        view.sweep_edit.setText("2, 4")
        view.sweep_edit.editingFinished.emit()
    assert got.args[0]["sweep"] == [2, 4]
    view.sweep_edit.setText("2, x")
    view.sweep_edit.editingFinished.emit()
    assert view.sweep_edit.text() == "2, 4" and "not batches" in view.status.text()
    view.draw(INFO, STEPS)
    view.clear("Preparing…")
    assert view.heat.image.image is None and view.slider.maximum() == 0
    assert "Closed forms" in view.formulas.panel.text()


def test_parse_sweep():
    assert parse_sweep("1, 2,4") == [1, 2, 4]
    assert parse_sweep("") == [] and parse_sweep("none") == []
    assert parse_sweep("0") is None and parse_sweep("a") is None
    assert parse_sweep(",".join(["2"] * 17)) is None


def test_imbalance_of_an_even_and_an_empty_row():
    assert imbalance([[2, 2], [0, 0], [4, 0]]).tolist() == [1.0, 1.0, 2.0]
    assert math.isclose(float(heat_codes([[1]], 2)[0, 0]), 128)
