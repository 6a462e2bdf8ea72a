"""The step lab's widgets drawn from records built by hand: the op table's cells, the ops on the
roofline (dots sized by time, the uncosted left out and counted), the timeline's bars by lane
and kind, the split's stacks and between-ops labels, the trace tab's tables and bars, and the
form's settings round trip."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.engines.labs.step.op_rows import step_rows, trace_rows
from inferlab.engines.labs.step.records import ExecutionRecord, StepRunInfo
from inferlab.engines.profile.breakdown import LaneTime
from inferlab.engines.profile.kernel_table import KernelRow
from inferlab.engines.profile.op_roofline import OpPoint
from inferlab.engines.profile.op_roofline import Roof as TraceRoof
from inferlab.engines.profile.step_ops import StepOp
from inferlab.engines.profile.step_split import Roof, split_step
from inferlab.engines.profile.trace_profile import TraceProfile
from inferlab.views.roofline_plot import RoofLine
from inferlab.views.step_form import StepForm
from inferlab.views.step_ops import OpTable, row_cells
from inferlab.views.step_roofline import MAX_DOT_PX, MIN_DOT_PX, OpsRoofline, dot_sizes
from inferlab.views.step_split import StepSplitBars
from inferlab.views.step_timeline import StepTimeline
from inferlab.views.step_trace import TraceTab
from inferlab.views.step_view import StepView

ROOF = Roof("cpu", peak_flops=100e9, bw_bytes_per_s=20e9)
INFO = StepRunInfo(model="tiny", model_name="tiny", phase="decode", batch=1, context=8,
                   tokens=64, rows=1, device="cpu", threads=1, cpu_capability="AVX2",
                   roof=ROOF)


def op(name, start_us, dur_us, flops=None, moved=None, lane="thread 0", layer=None):
    return StepOp(name=name, lane=lane, start_s=start_us * 1e-6, dur_s=dur_us * 1e-6,
                  flops=flops, bytes=moved, shapes="[1, 64]", layer=layer)


def record(execution, ops, step_us, lanes=("thread 0",)):
    step_s = step_us * 1e-6
    return ExecutionRecord(
        execution=execution, kernel_path="torch", step_s=step_s, step_unprofiled_s=step_s,
        compile_s=None, repeats=1, ops=tuple(ops), lanes=lanes,
        split=split_step(step_s, ops, ROOF), max_abs_diff=0.0, max_abs_logit=1.0,
        tolerance=1e-5, matches=True)


EAGER = record("eager", [op("aten::linear", 0, 40, 2e6, 4e5),
                         op("aten::scaled_dot_product_attention", 50, 10, 1e4, 4e4),
                         op("aten::mul", 70, 5, 64.0, 768.0),
                         op("aten::index", 80, 5)], 100)
NATIVE = record("native", [op("native::qkv", 0, 20, 2e6, 4e5, lane="native decoder", layer=0),
                           op("aten::linear", 25, 10, 1e6, 1e5)], 40,
                lanes=("native decoder", "thread 0"))


def test_op_table_cells(qtbot):
    table = OpTable()
    qtbot.addWidget(table)
    rows = step_rows("eager", EAGER.ops, ROOF)
    table.draw(rows)
    assert table.rowCount() == 4 and table.isColumnHidden(0)
    linear = next(r for r in rows if r.name == "aten::linear")
    # 2e6 FLOPs and 4e5 bytes in 40 µs; its roof is max(20 µs, 20 µs) = 20 µs: 50 %
    assert row_cells(linear) == ["eager", "aten::linear", "1", "40.0", "2M", "400k", "50G",
                                 "10G", "50%", "[1, 64]"]
    index = next(r for r in rows if r.name == "aten::index")
    assert row_cells(index)[4:9] == ["—"] * 5
    table.draw(rows + step_rows("native", NATIVE.ops, ROOF))
    assert not table.isColumnHidden(0) and table.rowCount() == 6


def test_ops_on_the_roofline(qtbot):
    plot = OpsRoofline()
    qtbot.addWidget(plot)
    rows = step_rows("eager", EAGER.ops, ROOF) + step_rows("native", NATIVE.ops, ROOF)
    plot.draw(rows, [RoofLine("measured", 100e9, 20e9, measured=True)])
    assert set(plot.dots) == {"eager", "native"}
    x, y, sizes = plot.dots["eager"]
    # the three costed eager ops; the uncosted aten::index is counted in the title
    assert len(x) == 3 and "1 not costed" in plot.item.titleLabel.text
    linear = next(i for i, xi in enumerate(x) if xi == pytest.approx(5.0))
    assert y[linear] == pytest.approx(2e6 / 40e-6)
    assert sizes[linear] == pytest.approx(MAX_DOT_PX)  # the longest op of both
    assert len(plot.scene_record.points) == 5


def test_dot_area_goes_with_time():
    sizes = dot_sizes([4.0, 1.0, 0.0], 4.0)
    assert sizes[0] == MAX_DOT_PX and sizes[1] == pytest.approx(MAX_DOT_PX / 2)
    assert sizes[2] == MIN_DOT_PX


def test_timeline_bars_by_lane_and_kind(qtbot):
    timeline = StepTimeline()
    qtbot.addWidget(timeline)
    timeline.draw([EAGER, NATIVE])
    assert timeline.rows == [("eager", "thread 0"), ("native", "native decoder"),
                             ("native", "thread 0")]
    matmul = timeline.bars["matmul"].opts
    # eager's linear on row 0, native's qkv on row 1 and its lm-head-like linear on row 2
    assert list(matmul["x0"]) == pytest.approx([0.0, 0.0, 0.025])
    assert list(matmul["x1"]) == pytest.approx([0.040, 0.020, 0.035])
    assert list(matmul["y0"] + 0.35) == pytest.approx([0, 1, 2])
    assert len(timeline.bars["attention"].opts["x0"]) == 1
    assert len(timeline.bars["uncosted"].opts["x0"]) == 1


def test_split_stacks_and_labels(qtbot):
    bars = StepSplitBars()
    qtbot.addWidget(bars)
    bars.draw([EAGER, NATIVE])
    # eager: ops busy 60 of 100 µs; at the roof: linear 20 + sdpa max(0.1, 2) = 2 + mul
    # max(6.4e-4, 0.0384) = 0.0384 µs, the index none
    at_roof = 20 + 2 + 0.0384
    assert bars.stacks[0].tolist() == pytest.approx([at_roof / 1e3, (60 - at_roof) / 1e3,
                                                     40 / 1e3])
    assert [label.textItem.toPlainText() for label in bars.labels] == [
        "between ops 40%", f"between ops {10 / 40:.0%}"]


def trace_profile() -> TraceProfile:
    roof = TraceRoof("h100-sxm", {"fp32": 67e12, "bf16": 989e12}, 3.35e12)
    return TraceProfile(
        path="/tmp/x/run.pt.trace.json", bytes_read=2048, events=12, level="gpu",
        kernels=(KernelRow("sm90_gemm", 4, 4e-3, 1e-3, 0.8),
                 KernelRow("Memcpy HtoD", 2, 1e-3, 5e-4, 0.2)),
        lanes=(LaneTime(0, 7, "stream 7", "stream", 6, 6e-3, 4e-3, 1e-3, 0.0, 1e-3),),
        roof=roof,
        ops=(OpPoint("aten::mm", "[[8, 64]]", "bf16", "bf16", 4, 4e-3, 4e9, 2e6, 1e-5),))


def test_trace_tab_draws_a_profile(qtbot):
    tab = TraceTab()
    qtbot.addWidget(tab)
    tab.draw(trace_profile())
    assert tab.kernels.rowCount() == 2 and tab.kernels.item(0, 0).text() == "sm90_gemm"
    assert tab.kernels.item(0, 4).text() == "80.0%"
    assert tab.breakdown.parts[0].tolist() == pytest.approx([4.0, 1.0, 0.0, 1.0])
    assert [r.name for r in tab.ops.rows] == ["aten::mm"]
    assert tab.ops.rows == tuple(trace_rows(trace_profile().ops))
    roofs = tab.roofline.scene_record.roofs
    assert [(r.label, r.peak_flops) for r in roofs] == [("h100-sxm bf16", 989e12)]
    assert "run.pt.trace.json" in tab.status.text() and "GPU kernels" in tab.status.text()
    tab.draw(None)
    assert tab.kernels.rowCount() == 0 and tab.ops.rowCount() == 0


def test_trace_tab_asks_the_lab(qtbot):
    tab = TraceTab()
    qtbot.addWidget(tab)
    tab.set_roofs([("measured", "this machine"), ("h100-sxm", "h100-sxm")])
    with qtbot.waitSignal(tab.roof_changed) as got:
        tab.roof.setCurrentIndex(1)
    assert got.args == ["h100-sxm"]


def test_form_round_trip_and_phase(qtbot):
    form = StepForm()
    qtbot.addWidget(form)
    form.set_models([("tiny", "tiny")])
    s = {"model": "tiny", "phase": "prefill", "batch": 3, "context": 40, "tokens": 17,
         "executions": ["eager", "compile"], "repeats": 2, "threads": 1}
    form.set_settings(s)
    assert form.settings() == s
    assert form.tokens.isEnabled() and not form.batch.isEnabled()
    with qtbot.waitSignal(form.settings_changed) as got:
        form.executions["native"].setChecked(True)
    assert got.args[0]["executions"] == ["eager", "compile", "native"]
    form.set_read_only(True)
    assert not form.run_button.isEnabled() and not form.tokens.isEnabled()


def test_view_draws_a_run_and_nothing(qtbot):
    view = StepView()
    qtbot.addWidget(view)
    view.draw(INFO, [EAGER, NATIVE])
    assert view.split.stacks.shape == (2, 3)
    assert sum(r.calls for r in view.ops.rows) == len(EAGER.ops) + len(NATIVE.ops)
    view.draw(None, [])
    assert view.ops.rowCount() == 0 and np.size(view.split.stacks) == 0
