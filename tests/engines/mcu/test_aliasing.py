"""In-place aliasing: RESHAPE as a view, element-wise ops in place, only where it is safe.

An aliased plan lists every tensor, aliased ones at their group's offset; it must run with
TFLM's outputs, its arena must be the merged buffers' plan, and an alias that would destroy
a tensor still read later (or a graph output) must not be made.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.mcu.aliasing import alias_groups, find_aliases, merged_buffers, plan_aliased
from inferlab.engines.mcu.examples import example_path, examples_dir
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.interpreter import ArenaInterpreter
from inferlab.engines.mcu.lifetimes import model_buffers
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.planners import conflicts
from tests.engines.mcu.mcu_int8_graphs import Int8Graph, random_branchy_graph

MODELS_DIR = examples_dir()


def random_input(model, seed: int) -> np.ndarray:
    t = model.tensors[model.inputs[0]]
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, size=t.shape, dtype=np.int64).astype(np.dtype(t.dtype))


def tflm_run(data: bytes, inputs):
    from tflite_micro.python.tflite_micro import runtime
    ref = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
    n_out = len(load_model(data).outputs)
    outs = []
    for x in inputs:
        ref.set_input(x, 0)
        ref.invoke()
        outs.append(tuple(ref.get_output(k) for k in range(n_out)))
    return outs


def assert_runs_like_tflm(data: bytes, plan, seeds=(0, 1, 2)):
    model = load_model(data)
    interp = ArenaInterpreter(model, plan)
    inputs = [random_input(model, s) for s in seeds]
    for x, want in zip(inputs, tflm_run(data, inputs), strict=True):
        got = interp.invoke(x)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w.reshape(g.shape))


def assert_aliased_plan_is_sound(model, plan):
    """Every tensor listed; aliased tensors share offsets; nothing else overlaps."""
    assert [b.tensor for b in plan.buffers] == [b.tensor for b in model_buffers(model)]
    offset = {b.tensor: o for b, o in zip(plan.buffers, plan.offsets, strict=True)}
    rep = alias_groups(model, find_aliases(model))
    for t, onto in plan.aliases:
        assert offset[t] == offset[onto]
    for i, j in conflicts(plan.buffers, plan.offsets):
        a, b = plan.buffers[i].tensor, plan.buffers[j].tensor
        assert a in rep and b in rep and rep[a] == rep[b], (a, b)


def conv_reshape_softmax() -> bytes:
    """input 8x8x2 -> 1x1 conv to 16 channels (1,024 B) -> RESHAPE (1, 1024) -> SOFTMAX:
    TFLM needs 2,048 B at the RESHAPE and the SOFTMAX; aliased, one 1,024-byte buffer
    carries all three, next to the 128-byte input."""
    g = Int8Graph(5)
    x = g.input((1, 8, 8, 2), scale=0.05, zp=1)
    y = g.conv(x, 16, k=1)
    y = g.reshape(y, (1, 1024))
    return g.build([g.softmax(y)])


def test_reshape_view_and_softmax_in_place_halve_the_arena():
    data = conv_reshape_softmax()
    model = load_model(data)
    aliases = find_aliases(model)
    assert [(a.op, a.kind) for a in aliases] == [(1, "view"), (2, "in-place")]
    assert plan_model(model, "tflm-greedy").arena_bytes == 2048
    plan = plan_model(model, "aliased")
    assert plan.arena_bytes == plan.lower_bound_bytes == 1024 + 128
    assert plan.aliases == (
        (aliases[0].tensor, aliases[0].onto),
        (aliases[1].tensor, aliases[1].onto),
    )
    assert_aliased_plan_is_sound(model, plan)
    assert_runs_like_tflm(data, plan)
    interp = ArenaInterpreter(model, plan)
    conv_out = model.operators[0].outputs[0]
    softmax_out = model.operators[2].outputs[0]
    assert np.shares_memory(interp.arrays[conv_out], interp.arrays[softmax_out])


def test_no_in_place_write_over_a_tensor_read_later():
    g = Int8Graph(9)
    x = g.input((1, 4, 4, 4), scale=0.05)
    a = g.conv(x, 8)
    b = g.conv(x, 8)
    s = g.add(a, b)  # a is read again below: s must not overwrite a
    t = g.add(s, a)  # last reads of s and a: t may take s's bytes (or a's)
    data = g.build([t])
    model = load_model(data)
    aliases = find_aliases(model)
    first_add = [al for al in aliases if al.op == 2]
    assert all(al.onto != a for al in first_add)
    assert [al.onto for al in first_add] == [b]  # b is dead after the first ADD
    plan = plan_aliased(model)
    assert_aliased_plan_is_sound(model, plan)
    assert_runs_like_tflm(data, plan)


def test_a_graph_output_is_never_overwritten_in_place():
    g = Int8Graph(4)
    x = g.input((1, 4, 4, 4), scale=0.05)
    a = g.conv(x, 8)
    y = g.softmax(a)
    data = g.build([y, a])  # a is an output too
    model = load_model(data)
    assert find_aliases(model) == []
    assert_runs_like_tflm(data, plan_aliased(model))


def test_a_reshape_chain_forms_one_group():
    g = Int8Graph(2)
    x = g.input((1, 4, 4, 4), scale=0.05)
    a = g.conv(x, 8)
    r1 = g.reshape(a, (1, 16, 8))
    r2 = g.reshape(r1, (1, 128))
    data = g.build([g.softmax(r2)])
    model = load_model(data)
    rep = alias_groups(model, find_aliases(model))
    assert rep[a] == rep[r1] == rep[r2] == a
    merged, where = merged_buffers(model_buffers(model), rep)
    assert len(merged) == len(model_buffers(model)) - 3  # a, r1, r2 and the softmax output
    plan = plan_aliased(model)
    assert_aliased_plan_is_sound(model, plan)
    assert_runs_like_tflm(data, plan)


@pytest.mark.parametrize("stem", ["hello_world_int8", "micro_speech_quantized", "person_detect"])
def test_shared_models_stay_bit_exact_and_never_grow(stem):
    path = example_path(stem)
    model = load_model(path)
    plan = plan_model(model, "aliased")
    assert plan.arena_bytes <= plan_model(model, "best").arena_bytes
    assert_aliased_plan_is_sound(model, plan)
    assert_runs_like_tflm(path.read_bytes(), plan)
    if stem == "micro_speech_quantized":  # RESHAPE of the input, SOFTMAX in place
        assert [(a.op, a.kind) for a in find_aliases(model)] == [(0, "view"), (3, "in-place")]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_random_graphs_aliased_equal_the_plain_interpreter(seed):
    model = load_model(random_branchy_graph(seed))
    plan = plan_aliased(model)
    assert_aliased_plan_is_sound(model, plan)
    assert plan.arena_bytes <= plan_model(model, "best").arena_bytes or plan.aliases
    plain = ArenaInterpreter(model, plan_model(model, "linear"))
    aliased = ArenaInterpreter(model, plan)
    for s in range(2):
        x = random_input(model, s)
        a, b = plain.invoke(x), aliased.invoke(x)
        a, b = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
        assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))
