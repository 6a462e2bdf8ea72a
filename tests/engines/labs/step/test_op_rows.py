"""OpRow, the op table's and ops roofline's record, from a step's ops and from a trace's ops on
a roof: calls summed per name and shapes, FLOP/s, bytes/s and the share of the roof, worked
by hand."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.step.op_rows import FUSED_NOTE, UNCOSTED_NOTE, step_rows, trace_rows
from inferlab.engines.profile.op_roofline import OpPoint
from inferlab.engines.profile.step_ops import StepOp
from inferlab.engines.profile.step_split import Roof

ROOF = Roof("cpu", peak_flops=100e9, bw_bytes_per_s=20e9)


def op(name, dur_us, flops=None, moved=None, shapes="[8, 64]"):
    return StepOp(name=name, lane="thread 0", start_s=0.0, dur_s=dur_us * 1e-6, flops=flops,
                  bytes=moved, shapes=shapes)


def test_calls_are_summed_per_name_and_shapes():
    ops = [op("aten::linear", 30, 2e6, 4e5), op("aten::linear", 10, 2e6, 4e5),
           op("aten::linear", 5, 1e6, 1e5, shapes="[1, 64]"),
           op("graph_0_cpp_fused_mul_0", 50), op("aten::index", 2)]
    rows = step_rows("eager", ops, ROOF)
    assert [(r.name, r.calls) for r in rows] == [
        ("graph_0_cpp_fused_mul_0", 1), ("aten::linear", 2), ("aten::linear", 1),
        ("aten::index", 1)]
    linear = rows[1]
    assert linear.time_s == pytest.approx(40e-6)
    assert (linear.flops, linear.bytes) == (4e6, 8e5)
    # each call's roof: max(2e6 / 100e9, 4e5 / 20e9) = max(20 µs, 20 µs) = 20 µs
    assert linear.at_roof_s == pytest.approx(40e-6)
    assert linear.of_roof == pytest.approx(1.0)
    assert linear.flops_per_s == pytest.approx(4e6 / 40e-6)
    assert linear.bytes_per_s == pytest.approx(8e5 / 40e-6)
    assert linear.intensity == pytest.approx(5.0)
    small = rows[2]  # max(1e6 / 100e9, 1e5 / 20e9) = 10 µs of its 5 µs: faster than its roof
    assert small.of_roof == pytest.approx(2.0)
    fused, index = rows[0], rows[3]
    assert not fused.costed and fused.note == FUSED_NOTE and fused.of_roof is None
    assert fused.flops_per_s is None and not fused.plottable
    assert index.note == UNCOSTED_NOTE


def test_a_group_with_one_call_not_costed_is_not_costed():
    rows = step_rows("native", [op("aten::mul", 3, 10.0, 12.0), op("aten::mul", 3)], ROOF)
    assert len(rows) == 1 and rows[0].calls == 2 and not rows[0].costed


def test_trace_points_keep_their_order_and_roof():
    points = [OpPoint("aten::mm", "[[8, 64], [64, 32]] ['c10::BFloat16']", "bf16", "bf16", 3,
                      6e-6, 3e5, 5e3, 1e-6),
              OpPoint("aten::add", "[[8]] ['signed char']", "int8", "fp32", 1, 1e-6, 8.0,
                      24.0, 1e-9)]
    rows = trace_rows(points)
    assert [r.name for r in rows] == ["aten::mm", "aten::add"]
    assert rows[0].series == "trace" and rows[0].calls == 3 and rows[0].of_roof == \
        pytest.approx(1 / 6)
    assert rows[0].note == "" and rows[1].note == "int8: set against the fp32 peak"
