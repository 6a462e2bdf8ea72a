"""The step split: hand-worked cases, and its invariants on random ops (hypothesis)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferlab.engines.profile.step_ops import StepOp
from inferlab.engines.profile.step_split import Roof, split_step

ROOF = Roof("test", peak_flops=1e9, bw_bytes_per_s=1e8)  # ridge 10 FLOP/byte


def op(start_s, dur_s, flops=None, moved=None, lane="thread 0"):
    return StepOp("aten::x", lane, start_s, dur_s, flops, moved)


def test_hand_worked_split():
    ops = [op(0.001, 0.004, flops=2e6, moved=1e5),    # roof max(2 ms, 1 ms) = 2 ms
           op(0.006, 0.002, flops=1e3, moved=1e5),    # roof max(1 µs, 1 ms) = 1 ms
           op(0.009, 0.0005)]                         # not costed: roof 0
    s = split_step(0.010, ops, ROOF)
    assert s.at_roof_s == pytest.approx(0.003)
    assert s.busy_s == pytest.approx(0.0065)
    assert s.inside_ops_s == pytest.approx(0.0035)
    assert s.between_ops_s == pytest.approx(0.0035)
    assert s.beats_roof == 0
    assert s.between_ops_share == pytest.approx(0.35)


def test_an_op_faster_than_its_roof_counts_its_own_time():
    s = split_step(0.002, [op(0.0, 0.001, flops=0.0, moved=1e6)], ROOF)  # roof 10 ms
    assert s.at_roof_s == pytest.approx(0.001)
    assert s.inside_ops_s == 0.0 and s.beats_roof == 1


def test_overlapping_ops_count_once():
    s = split_step(0.010, [op(0.0, 0.006, lane="a"), op(0.004, 0.004, lane="b")], ROOF)
    assert s.busy_s == pytest.approx(0.008) and s.ops_s == pytest.approx(0.010)
    assert s.between_ops_s == pytest.approx(0.002)


def test_ops_outside_the_step_are_clipped():
    s = split_step(0.001, [op(-0.001, 0.0015), op(0.0009, 0.001)], ROOF)
    assert s.busy_s == pytest.approx(0.0006)


def test_negative_step_refused():
    with pytest.raises(ValueError, match="step_s"):
        split_step(-1.0, [], ROOF)


costs = st.one_of(st.none(), st.floats(0, 1e9))
ops_st = st.lists(st.builds(op, st.floats(-1e-3, 2e-2), st.floats(0, 1e-2), costs, costs),
                  max_size=30)


@given(st.floats(0, 2e-2), ops_st)
def test_parts_add_up_and_none_is_negative(step_s, ops):
    ops = [o if (o.flops is None) == (o.bytes is None) else op(o.start_s, o.dur_s)
           for o in ops]
    s = split_step(step_s, ops, ROOF)
    assert min(s.at_roof_s, s.inside_ops_s, s.between_ops_s) >= 0
    assert math.fsum([s.at_roof_s, s.inside_ops_s, s.between_ops_s]) == \
        pytest.approx(step_s, abs=1e-15)
    assert s.at_roof_s <= s.busy_s <= step_s
