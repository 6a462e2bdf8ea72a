"""Two traces compared per op name: worked by hand."""

from __future__ import annotations

import math

from inferlab.engines.profile.chrome_trace import TraceEvent
from inferlab.engines.profile.compare import compare_traces, shared_level


def ev(name, dur_us, cat="cpu_op"):
    return TraceEvent(name, cat, 0.0, dur_us, 1, 1, {})


def test_compare_by_hand():
    a = [ev("aten::mm", 10.0), ev("aten::mm", 30.0), ev("aten::add", 5.0), ev("aten::gone", 2.0)]
    b = [ev("aten::mm", 10.0), ev("aten::add", 15.0), ev("aten::new", 1.0)]
    rows = {r.name: r for r in compare_traces(a, b)}
    assert (rows["aten::mm"].calls_a, rows["aten::mm"].calls_b) == (2, 1)
    assert math.isclose(rows["aten::mm"].b_over_a, 10 / 40)
    assert math.isclose(rows["aten::add"].b_over_a, 3.0)
    assert rows["aten::new"].b_over_a == math.inf and rows["aten::gone"].b_over_a == 0.0
    # the largest change of time first: mm (-30 µs), then add (+10), gone (-2), new (+1)
    assert [r.name for r in compare_traces(a, b)] == ["aten::mm", "aten::add", "aten::gone",
                                                     "aten::new"]


def test_a_gpu_trace_is_compared_at_the_kernel_level():
    cpu = [ev("aten::mm", 10.0)]
    gpu = [ev("aten::mm", 10.0), ev("gemm", 4.0, cat="kernel")]
    assert shared_level(cpu, gpu) == "gpu"
    (row,) = compare_traces(cpu, gpu)
    assert (row.name, row.calls_a, row.calls_b) == ("gemm", 0, 1)
