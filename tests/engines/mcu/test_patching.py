"""Patch-based execution (MCUNetV2): region kernels, patch stages, arena figures, bit-exactness.

A region of a sliding-window op, computed from just the input rows and columns it reads,
must equal that part of the whole output; a stage run patch by patch must give the outputs
TFLM gives, in a smaller arena. person_detect is the goal: at most half of TFLM's 55,296 B.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.mcu.examples import example_path, examples_dir
from inferlab.engines.mcu.graph import ModelError, load_model
from inferlab.engines.mcu.interpreter import ArenaInterpreter
from inferlab.engines.mcu.kernels import REGION_KERNELS, OpContext
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.op_costs import op_macs
from inferlab.engines.mcu.patching import (
    MAX_MAC_OVERHEAD,
    op_window,
    patch_applicable,
    patch_regions,
    plan_patch_based,
    plan_stage,
    stage_candidates,
    stage_chain,
)
from inferlab.engines.mcu.planners import conflicts
from tests.engines.mcu.mcu_int8_graphs import Int8Graph

MODELS_DIR = examples_dir()
TFLM_PERSON_DETECT_HEAD = 55296


def model_path(stem: str) -> Path:
    return example_path(stem)


def random_input(model, seed: int) -> np.ndarray:
    t = model.tensors[model.inputs[0]]
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, size=t.shape, dtype=np.int64).astype(np.dtype(t.dtype))


@pytest.fixture(scope="module")
def person_detect():
    return load_model(model_path("person_detect"))


@pytest.fixture(scope="module")
def person_plan(person_detect):
    return plan_model(person_detect, "patch-based")


# ---- region kernels ------------------------------------------------------------------------


@st.composite
def region_cases(draw):
    op = draw(st.sampled_from(sorted(REGION_KERNELS)))
    k = draw(st.integers(1, 4))
    stride = draw(st.integers(1, 3))
    dilation = draw(st.integers(1, 2)) if op in ("CONV_2D", "DEPTHWISE_CONV_2D") else 1
    padding = draw(st.sampled_from(("SAME", "VALID")))
    eff = (k - 1) * dilation + 1
    h = draw(st.integers(eff, eff + 9))
    w = draw(st.integers(eff, eff + 9))
    c = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**16))
    g = Int8Graph(seed)
    x = g.input((1, h, w, c), scale=0.05, zp=int(seed % 7) - 3)
    if op == "CONV_2D":
        y = g.conv(x, draw(st.integers(1, 6)), k=k, stride=stride, padding=padding,
                   dilation=dilation, act="RELU")  # fmt: skip
    elif op == "DEPTHWISE_CONV_2D":
        y = g.dw(x, k=k, stride=stride, multiplier=draw(st.integers(1, 3)), padding=padding,
                 dilation=dilation)  # fmt: skip
    else:
        y = g.pool(x, op, k=k, stride=stride, padding=padding)
    model = load_model(g.build([y]))
    _, oh, ow, _ = model.tensors[y].shape
    y0 = draw(st.integers(0, oh - 1))
    y1 = draw(st.integers(y0 + 1, oh))
    x0 = draw(st.integers(0, ow - 1))
    x1 = draw(st.integers(x0 + 1, ow))
    return model, seed, (y0, y1, x0, x1)


@settings(max_examples=60, deadline=None)
@given(region_cases())
def test_a_region_from_the_rows_it_reads_equals_that_part_of_the_whole_output(case):
    model, seed, (y0, y1, x0, x1) = case
    op = model.operators[0]
    x = random_input(model, seed)
    arrays = [model.constant_array(t.index) if t.is_constant else None for t in model.tensors]
    arrays[op.inputs[0]] = x
    whole = np.zeros(model.tensors[op.outputs[0]].shape, dtype=np.int8)
    arrays[op.outputs[0]] = whole
    ctx = OpContext(model, op, arrays)
    run_region = REGION_KERNELS[op.op](ctx)
    run_region(x, (0, 0), whole, (0, 0))
    win = op_window(model, 0)
    r0, r1 = win.rows_read(y0, y1)
    c0, c1 = win.cols_read(x0, x1)
    part = x[:, r0:r1, c0:c1].copy()  # only the rows and columns the region reads
    region = np.zeros((1, y1 - y0, x1 - x0, whole.shape[3]), dtype=np.int8)
    run_region(part, (r0, c0), region, (y0, x0))
    assert np.array_equal(region, whole[:, y0:y1, x0:x1])


def test_a_region_short_of_the_rows_it_reads_is_refused():
    g = Int8Graph(1)
    x = g.input((1, 6, 6, 2))
    model = load_model(g.build([g.conv(x, 3, k=3)]))
    op = model.operators[0]
    arrays = [model.constant_array(t.index) if t.is_constant else None for t in model.tensors]
    run_region = REGION_KERNELS[op.op](OpContext(model, op, arrays))
    out = np.zeros((1, 2, 6, 3), dtype=np.int8)
    with pytest.raises(ValueError, match="does not hold rows"):
        run_region(np.zeros((1, 2, 6, 2), np.int8), (2, 0), out, (2, 0))  # needs rows 1..5


# ---- stages and tiles ----------------------------------------------------------------------


def test_person_detect_stage_is_its_conv_chain(person_detect):
    chain = stage_chain(person_detect)
    assert chain == tuple(range(29))  # every conv/depthwise/pool up to the classifier conv
    assert stage_candidates(person_detect)[0] == (0, 1)
    assert patch_applicable(person_detect)


def test_tiles_of_the_stage_output_cover_it_once_and_inner_tiles_cover_what_is_read(
    person_detect,
):
    ops = (0, 1, 2, 3, 4, 5, 6, 7)
    regions = patch_regions(person_detect, ops, (3, 4))
    assert len(regions) == 12
    _, oh, ow, _ = person_detect.tensors[person_detect.operators[7].outputs[0]].shape
    cover = np.zeros((oh, ow), dtype=int)
    for regs in regions:
        (r0, r1), (c0, c1) = regs[-1]
        cover[r0:r1, c0:c1] += 1
    assert (cover == 1).all()
    for regs in regions:  # each inner tile holds exactly what the next operator reads
        for k in range(1, len(ops)):
            win = op_window(person_detect, ops[k])
            (r0, r1), (c0, c1) = regs[k]
            assert regs[k - 1] == (win.rows_read(r0, r1), win.cols_read(c0, c1))


def test_person_detect_patch_based_arena_is_at_most_half_of_tflm(person_detect, person_plan):
    plan = person_plan
    assert plan.planner == "patch-based"
    assert plan.arena_bytes <= TFLM_PERSON_DETECT_HEAD // 2
    # The figure: stage = operators 0..7 (to 12x12x32), 4 x 4 patches, 22,496 B = 40.7 %
    # of TFLM's head; it is the plan's lower bound, so no placement does better.
    assert plan.arena_bytes == plan.lower_bound_bytes == 22496
    assert plan.patch.ops == (0, 1, 2, 3, 4, 5, 6, 7) and plan.patch.grid == (4, 4)
    assert not conflicts(plan.buffers, plan.offsets)
    assert plan.op_order is None and plan.aliases == ()
    assert len(plan.step_labels) == max(b.last for b in plan.buffers) + 1
    total = sum(op_macs(person_detect, i) for i in range(len(person_detect.operators)))
    assert plan.patch.macs - plan.patch.plain_macs <= MAX_MAC_OVERHEAD * total
    assert plan.patch.macs > plan.patch.plain_macs  # overlapping patches recompute
    d = plan.to_dict()
    assert d["patch"]["grid"] == [4, 4] and len(d["patch"]["tiles"]) == 16 * 8


def test_person_detect_patch_based_equals_tflm(person_detect, person_plan):
    from tflite_micro.python.tflite_micro import runtime
    ref = runtime.Interpreter.from_file(str(model_path("person_detect")), arena_size=1 << 20)
    patched = ArenaInterpreter(person_detect, person_plan)
    plain = ArenaInterpreter(person_detect, plan_model(person_detect))
    assert patched.arena_bytes == person_plan.arena_bytes
    outs = set()
    for seed in range(5):
        x = random_input(person_detect, seed)
        ref.set_input(x, 0)
        ref.invoke()
        want = ref.get_output(0)
        got = patched.invoke(x)
        assert np.array_equal(got, want.reshape(got.shape)), seed
        assert np.array_equal(got, plain.invoke(x))
        outs.add(got.tobytes())
    assert len(outs) > 1
    assert len(patched.last_op_times_s) == len(person_detect.operators)


def test_tiles_live_in_the_one_arena(person_detect):
    plan = plan_stage(person_detect, (0, 1, 2), (2, 3))
    interp = ArenaInterpreter(person_detect, plan)
    arena = np.frombuffer(interp.arena, dtype=np.uint8)
    tile_buffers = [b for b in plan.buffers if b.tensor is None]
    assert len(tile_buffers) == 6 * 2  # outputs of operators 0 and 1, per patch
    for t in plan.patch.tiled_tensors:
        assert interp.arrays[t] is None  # never held whole
    x = random_input(person_detect, 3)
    y = interp.invoke(x)
    assert np.array_equal(interp.invoke(x), y)
    assert np.array_equal(y, ArenaInterpreter(person_detect, plan_model(person_detect)).invoke(x))
    assert interp.arena_address == int(arena.ctypes.data)


@pytest.mark.parametrize("grid", [(1, 2), (2, 1), (3, 2), (5, 5)])
def test_other_stages_and_grids_stay_bit_exact(person_detect, grid):
    plain = ArenaInterpreter(person_detect, plan_model(person_detect))
    for ops in ((0, 1), (0, 1, 2, 3, 4), tuple(range(12))):
        interp = ArenaInterpreter(person_detect, plan_stage(person_detect, ops, grid))
        x = random_input(person_detect, len(ops))
        assert np.array_equal(interp.invoke(x), plain.invoke(x)), (ops, grid)


def _conv_chain(seed: int) -> bytes:
    """Strides, dilation, VALID and SAME padding, depth multipliers and both pools."""
    g = Int8Graph(seed)
    x = g.input((1, 17, 13, 3), scale=0.04, zp=2)
    y = g.conv(x, 8, k=3, stride=2, padding="SAME", act="RELU6")
    y = g.dw(y, k=3, stride=1, multiplier=2, padding="VALID", dilation=2)
    y = g.pool(y, "MAX_POOL_2D", k=2, stride=1, padding="SAME")
    y = g.conv(y, 6, k=2, stride=1, padding="VALID", act="RELU")
    y = g.pool(y, "AVERAGE_POOL_2D", k=3, stride=2, padding="SAME")
    y = g.reshape(y, (1, int(np.prod(g.shape(y)[1:]))))
    return g.build([g.softmax(y)])


def test_a_varied_conv_chain_patch_by_patch_equals_tflm():
    from tflite_micro.python.tflite_micro import runtime
    for seed in (0, 1):
        data = _conv_chain(seed)
        model = load_model(data)
        assert stage_chain(model) == (0, 1, 2, 3, 4)
        ref = runtime.Interpreter.from_bytes(data, arena_size=1 << 18)
        plans = [plan_stage(model, (0, 1, 2, 3, 4), (3, 2)), plan_stage(model, (0, 1, 2), (4, 4))]
        plans.append(plan_patch_based(model, max_mac_overhead=None))
        for plan in plans:
            interp = ArenaInterpreter(model, plan)
            for k in range(3):
                x = random_input(model, 10 * seed + k)
                ref.set_input(x, 0)
                ref.invoke()
                want = ref.get_output(0)
                got = interp.invoke(x)
                assert np.array_equal(got, want.reshape(got.shape)), (seed, plan.patch.grid)


def test_models_without_a_stage_are_refused_by_name():
    for stem in ("hello_world_int8", "micro_speech_quantized"):
        model = load_model(model_path(stem))
        assert not patch_applicable(model)
        with pytest.raises(ModelError, match="no stage to run patch by patch"):
            plan_model(model, "patch-based")


def test_the_mac_budget_limits_the_search(person_detect):
    loose = plan_patch_based(person_detect, max_mac_overhead=None)
    assert loose.arena_bytes <= 22496
    total = sum(op_macs(person_detect, i) for i in range(len(person_detect.operators)))
    tight = plan_patch_based(person_detect, max_mac_overhead=0.05)
    assert tight.patch.macs - tight.patch.plain_macs <= 0.05 * total
    assert tight.arena_bytes >= loose.arena_bytes


@st.composite
def chains(draw):
    """A RESHAPE (so the stage starts mid-graph), then 2-4 sliding-window operators of
    random geometry, then a 1x1 conv read by two branches that join again."""
    seed = draw(st.integers(0, 2**16))
    g = Int8Graph(seed)
    h, w, c = draw(st.integers(6, 14)), draw(st.integers(6, 14)), draw(st.integers(1, 4))
    x = g.input((1, h * w * c), scale=0.05, zp=1)
    y = g.reshape(x, (1, h, w, c))
    for _ in range(draw(st.integers(2, 4))):
        _, hh, ww, _ = g.shape(y)
        kind = draw(st.sampled_from(("conv", "dw", "max", "avg")))
        k = draw(st.integers(1, min(3, hh, ww)))
        stride = draw(st.integers(1, 2))
        padding = draw(st.sampled_from(("SAME", "VALID")))
        if kind == "conv":
            y = g.conv(y, draw(st.integers(1, 6)), k=k, stride=stride, padding=padding, act="RELU")
        elif kind == "dw":
            y = g.dw(y, k=k, stride=stride, multiplier=draw(st.integers(1, 2)), padding=padding)
        else:
            pool = "MAX_POOL_2D" if kind == "max" else "AVERAGE_POOL_2D"
            y = g.pool(y, pool, k=k, stride=stride, padding=padding)
    a = g.conv(y, 4)
    b1, b2 = g.conv(a, 4), g.dw(a, k=1)
    data = g.build([g.add(b1, b2)])
    model = load_model(data)
    chain = stage_chain(model)
    ops = chain[: draw(st.integers(2, len(chain)))]
    _, oh, ow, _ = model.tensors[model.operators[ops[-1]].outputs[0]].shape
    grid = (draw(st.integers(1, oh)), draw(st.integers(1, ow)))
    return model, seed, ops, grid


@settings(max_examples=30, deadline=None)
@given(chains())
def test_random_chains_patch_by_patch_equal_the_plain_interpreter(case):
    model, seed, ops, grid = case
    assert ops[0] == 1  # after the RESHAPE
    plan = plan_stage(model, ops, grid)
    assert not conflicts(plan.buffers, plan.offsets)
    plain = ArenaInterpreter(model, plan_model(model, "linear"))
    patched = ArenaInterpreter(model, plan)
    for s in range(2):
        x = random_input(model, seed + s)
        assert np.array_equal(patched.invoke(x), plain.invoke(x)), (ops, grid)
