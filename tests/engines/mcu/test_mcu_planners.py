"""engines/mcu/planners.py: exact offsets on hand-worked cases, properties on random buffers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.lifetimes import Buffer
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.plan import Plan
from inferlab.engines.mcu.planners import (
    PLANNERS,
    arena_bytes,
    conflicts,
    lower_bound_bytes,
    plan_best,
    plan_buffers,
    plan_linear,
    plan_tflm_greedy,
)
from tests.engines.mcu.mcu_testdata import MODELS_DIR


def bufs(*specs) -> list[Buffer]:
    return [Buffer(size, first, last, i, f"b{i}") for i, (size, first, last) in enumerate(specs)]


# ---- hand-worked examples --------------------------------------------------------------


def test_tflm_tie_break_places_the_later_buffer_first():
    # Equal sizes: TFLM takes the buffer added later first, so b1 gets offset 0.
    b = bufs((32, 0, 1), (32, 1, 2))
    assert plan_tflm_greedy(b) == [32, 0]
    assert plan_linear(b) == [0, 32]


def test_greedy_fills_the_gap_under_a_long_buffer():
    #   b0 64 B steps 0-1, b1 32 B 1-2, b2 48 B 2-3, b3 16 B 0-3.
    # Order b0, b2, b1, b3. b0 -> 0. b2 does not meet b0 -> 0. b1 meets b0 (0..64) and
    # b2 (0..48) -> 64. b3 meets all three: 0..64 and 64..96 are taken -> 96.
    b = bufs((64, 0, 1), (32, 1, 2), (48, 2, 3), (16, 0, 3))
    assert plan_tflm_greedy(b) == [0, 64, 0, 96]
    assert arena_bytes(b, plan_tflm_greedy(b)) == 112
    assert lower_bound_bytes(b) == 112  # step 1: 64 + 32 + 16
    assert plan_linear(b) == [0, 64, 96, 144]
    assert arena_bytes(b, plan_linear(b)) == 160


def test_best_beats_greedy_where_largest_first_goes_wrong():
    #   b0 32 B step 0, b1 80 B 0-3, b2 80 B 3-5, b3 64 B 0-1.
    # TFLM: b2 -> 0; b1 meets b2 -> 80; b3 meets only b1 (80..160) -> 0 fits below it;
    # b0 meets b3 (0..64) and b1 (80..160): the 16-byte hole is too small -> 160. 192 B.
    # Better: b1 at 0, b3 at 80, b0 at 144, b2 at 80 -> 176 B, the lower bound (step 0).
    b = bufs((32, 0, 0), (80, 0, 3), (80, 3, 5), (64, 0, 1))
    assert plan_tflm_greedy(b) == [160, 80, 0, 0]
    assert arena_bytes(b, plan_tflm_greedy(b)) == 192
    best = plan_best(b)
    assert arena_bytes(b, best) == 176 == lower_bound_bytes(b)
    assert conflicts(b, best) == []


def test_empty_buffer_list():
    for planner in PLANNERS.values():
        assert planner([]) == []
    assert arena_bytes([], []) == 0 and lower_bound_bytes([]) == 0


def test_conflicts_names_the_pair():
    b = bufs((32, 0, 1), (32, 1, 2), (32, 3, 4))
    assert conflicts(b, [0, 16, 0]) == [(0, 1)]


def test_high_water_by_step():
    b = bufs((64, 0, 1), (32, 1, 2), (48, 2, 3), (16, 0, 3))
    plan = plan_buffers(b, "tflm-greedy")
    assert plan.high_water_by_step() == [(0, 112), (1, 112), (2, 112), (3, 112)]
    plan = plan_buffers(b[:3], "tflm-greedy")
    assert plan.high_water_by_step() == [(0, 64), (1, 96), (2, 96), (3, 48)]


# ---- properties on random buffer lists -------------------------------------------------


ANY_SIZE = st.integers(1, 300)


@st.composite
def buffer_lists(draw, max_size=10, sizes=ANY_SIZE):
    n = draw(st.integers(0, max_size))
    out = []
    for i in range(n):
        first = draw(st.integers(-1, 8))
        last = first + draw(st.integers(0, 5))
        out.append(Buffer(draw(sizes), first, last, i, f"b{i}"))
    return out


def live_peak(b: list[Buffer]) -> int:
    steps = range(min((x.first for x in b), default=0), max((x.last for x in b), default=-1) + 1)
    return max((sum(x.size for x in b if x.live_at(t)) for t in steps), default=0)


@settings(max_examples=150, deadline=None)
@given(buffer_lists())
def test_every_planner_is_valid_and_above_the_lower_bound(b):
    floor = lower_bound_bytes(b)
    assert floor == live_peak(b)
    sizes = {}
    for name, planner in PLANNERS.items():
        offsets = planner(b)
        assert len(offsets) == len(b) and all(o >= 0 for o in offsets)
        assert conflicts(b, offsets) == [], name
        sizes[name] = arena_bytes(b, offsets)
        assert sizes[name] >= floor, name
    assert sizes["linear"] == sum(x.size for x in b)
    assert sizes["best"] <= sizes["tflm-greedy"] <= sizes["linear"]


@settings(max_examples=60, deadline=None)
@given(buffer_lists(max_size=10, sizes=st.sampled_from([16, 32, 48, 64, 96, 128, 256])))
def test_planners_on_aligned_sizes(b):
    greedy, best = plan_tflm_greedy(b), plan_best(b)
    assert conflicts(b, greedy) == [] and conflicts(b, best) == []
    assert lower_bound_bytes(b) <= arena_bytes(b, best) <= arena_bytes(b, greedy)


@settings(max_examples=50, deadline=None)
@given(buffer_lists())
def test_linear_offsets_are_prefix_sums(b):
    offsets, total = [], 0
    for x in b:
        offsets.append(total)
        total += x.size
    assert plan_linear(b) == offsets


def optimum(b: list[Buffer]) -> int:
    """The smallest arena, by trying every offset (tiny cases only)."""
    best = sum(x.size for x in b)

    def place(i, offsets, top):
        nonlocal best
        if top >= best:
            return
        if i == len(b):
            best = top
            return
        for o in range(best - b[i].size + 1):
            if all(
                not b[i].overlaps_in_time(b[j])
                or o >= offsets[j] + b[j].size
                or offsets[j] >= o + b[i].size
                for j in range(i)
            ):
                place(i + 1, [*offsets, o], max(top, o + b[i].size))

    place(0, [], 0)
    return best


@settings(max_examples=120, deadline=None)
@given(buffer_lists(max_size=5, sizes=st.integers(1, 6)))
def test_best_is_optimal_on_small_cases(b):
    assert arena_bytes(b, plan_best(b)) == optimum(b)


# ---- plans of models -------------------------------------------------------------------


def test_plan_model_to_dict():
    path = MODELS_DIR / "micro_speech_quantized.tflite"
    plan = plan_model(path)
    assert isinstance(plan, Plan) and plan.planner == "tflm-greedy"
    d = json.loads(json.dumps(plan.to_dict()))
    assert d["arena_bytes"] == 5968 and d["lower_bound_bytes"] == 5968
    assert d["buffers"][0] == {
        "name": "Relu",
        "tensor": 2,
        "offset": 0,
        "size": 4000,
        "first": 2,
        "last": 3,
    }
    assert [x["offset"] for x in d["buffers"]] == [0, 0, 4000, 4000, 0]
    # Same plan from bytes and from a loaded model.
    assert plan_model(path.read_bytes()).offsets == plan.offsets
    assert plan_model(load_model(path), "linear").arena_bytes == 4000 + 1968 * 2 + 16 + 16


def test_unknown_planner():
    with pytest.raises(ValueError, match="unknown planner 'fast'; expected one of linear"):
        plan_buffers([], "fast")
