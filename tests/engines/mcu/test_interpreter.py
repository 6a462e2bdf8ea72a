"""The arena interpreter on the shared TFLM models, bit for bit against TFLM itself.

Every plan (TFLM's greedy, no reuse at all, our best, an in-place RESHAPE) must give the
outputs the `tflite-micro` wheel gives, for seeded random int8 inputs; every intermediate
tensor must match too. The arena is one bytearray, allocated once.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from inferlab.engines.mcu.examples import example_path, examples_dir
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.interpreter import ArenaInterpreter, UnsupportedOpError, supported_ops
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.op_costs import op_macs

MODELS_DIR = examples_dir()
INT8_MODELS = ("hello_world_int8", "micro_speech_quantized", "person_detect")
SEEDS = (0, 1, 2, 3, 4)


def model_path(stem: str) -> Path:
    return example_path(stem)


@pytest.fixture(scope="module")
def tflm():
    from tflite_micro.python.tflite_micro import runtime  # the test extra's: never skipped

    return runtime


def random_input(model, seed: int) -> np.ndarray:
    t = model.tensors[model.inputs[0]]
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, size=t.shape, dtype=np.int64).astype(np.dtype(t.dtype))


def tflm_outputs(tflm, path: Path, inputs, preserve: bool = False):
    kwargs = {"intrepreter_config": tflm.InterpreterConfig.kPreserveAllTensors} if preserve else {}
    ref = tflm.Interpreter.from_file(str(path), arena_size=1024 * 1024, **kwargs)
    outs = []
    for x in inputs:
        ref.set_input(x, 0)
        ref.invoke()
        outs.append(ref.get_output(0))
    return outs, ref


@pytest.mark.parametrize("stem", INT8_MODELS)
def test_outputs_equal_tflm_for_every_planner(tflm, stem):
    path = model_path(stem)
    model = load_model(path)
    inputs = [random_input(model, s) for s in SEEDS]
    want, _ = tflm_outputs(tflm, path, inputs)
    for planner in ("tflm-greedy", "linear", "best"):
        plan = plan_model(model, planner)
        interp = ArenaInterpreter(model, plan)
        assert interp.arena_bytes == plan.arena_bytes
        for x, w in zip(inputs, want, strict=True):
            got = interp.invoke(x)
            assert got.dtype == w.dtype
            assert np.array_equal(got, w.reshape(got.shape)), (stem, planner, got, w)
    # the inputs actually exercise the model: not every output is the same
    assert len({w.tobytes() for w in want}) > 1


@pytest.mark.parametrize("stem", INT8_MODELS)
def test_every_intermediate_tensor_equals_tflm(tflm, stem):
    path = model_path(stem)
    model = load_model(path)
    x = random_input(model, 11)
    _, ref = tflm_outputs(tflm, path, [x], preserve=True)
    # The greedy plan lets later ops overwrite earlier activations; a no-reuse plan keeps
    # every tensor to the end, so all of them can be read back after one invoke.
    linear = ArenaInterpreter(model, plan_model(model, "linear"))
    linear.invoke(x)
    for op in model.operators:
        for t in op.outputs:
            want = np.asarray(ref.GetTensor(t, 0)["tensor_data"])
            got = linear.tensor(t)
            assert np.array_equal(got, want.reshape(got.shape)), (stem, op.index, op.op, t)


def test_hello_world_sine_curve(tflm):
    """hello_world_int8 predicts sin(x): quantize x, run, dequantize, compare to the sine."""
    model = load_model(model_path("hello_world_int8"))
    interp = ArenaInterpreter(model, plan_model(model))
    tin, tout = model.tensors[model.inputs[0]], model.tensors[model.outputs[0]]
    xs = np.linspace(0.1, 2 * np.pi - 0.1, 40)
    q = np.clip(np.round(xs / tin.quantization.scale[0]) + tin.quantization.zero_point[0],
                -128, 127).astype(np.int8)  # fmt: skip
    ys = interp.invoke_many(q.reshape(-1, 1, 1))
    assert ys.shape == (40, 1, 1)
    real = (ys.reshape(-1).astype(np.float64) - tout.quantization.zero_point[0]) * (
        tout.quantization.scale[0]
    )
    assert np.max(np.abs(real - np.sin(xs))) < 0.25


def test_in_place_reshape_plan(tflm):
    """A plan that puts RESHAPE's output on its input's bytes still runs bit-exact."""
    path = model_path("micro_speech_quantized")
    model = load_model(path)
    reshape = next(op for op in model.operators if op.op == "RESHAPE")
    src, dst = reshape.inputs[0], reshape.outputs[0]
    plan = plan_model(model, "linear")
    index = {b.tensor: i for i, b in enumerate(plan.buffers)}
    offsets = list(plan.offsets)
    offsets[index[dst]] = offsets[index[src]]
    aliased = dataclasses.replace(plan, planner="in-place-reshape", offsets=tuple(offsets))
    interp = ArenaInterpreter(model, aliased)
    a, b = interp.arrays[src], interp.arrays[dst]
    assert a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    inputs = [random_input(model, s) for s in SEEDS]
    want, _ = tflm_outputs(tflm, path, inputs)
    for x, w in zip(inputs, want, strict=True):
        assert np.array_equal(interp.invoke(x), w)


def test_arena_is_allocated_once():
    model = load_model(model_path("person_detect"))
    plan = plan_model(model)
    interp = ArenaInterpreter(model, plan)
    arena, address = interp.arena, interp.arena_address
    assert isinstance(arena, bytearray) and len(arena) == plan.arena_bytes == 55296
    arena_u8 = np.frombuffer(arena, dtype=np.uint8)
    planned = [b.tensor for b in plan.buffers if b.tensor is not None]
    for t in planned:  # every activation is a view into the one arena
        assert np.shares_memory(interp.arrays[t], arena_u8)
    for t in model.tensors:  # every weight stays in the model's buffers ("flash")
        if t.is_constant:
            assert not np.shares_memory(interp.arrays[t.index], arena_u8)
            assert not interp.arrays[t.index].flags.writeable
    x0, x1 = random_input(model, 0), random_input(model, 1)
    y0 = interp.invoke(x0)
    y1 = interp.invoke(x1)
    assert interp.invoke(x0).tolist() == y0.tolist()
    assert interp.invoke(x1).tolist() == y1.tolist()
    assert interp.arena is arena and interp.arena_address == address
    assert interp.invocations == 4
    with pytest.raises(BufferError):  # the exported views pin it: it cannot be resized
        arena.extend(b"\0")


def test_outputs_are_copies_and_timings_per_op():
    model = load_model(model_path("micro_speech_quantized"))
    interp = ArenaInterpreter(model, plan_model(model))
    x = random_input(model, 3)
    y = interp.invoke(x)
    y[...] = 0  # the caller's copy, not the arena
    assert not np.array_equal(interp.invoke(x), y)
    assert len(interp.last_op_times_s) == len(model.operators)
    assert all(t >= 0 for t in interp.last_op_times_s)
    ys = interp.invoke_many([random_input(model, s) for s in SEEDS])
    assert ys.shape == (len(SEEDS), 1, 4) and ys.dtype == np.int8


def test_bad_inputs_are_refused():
    model = load_model(model_path("hello_world_int8"))
    interp = ArenaInterpreter(model, plan_model(model))
    with pytest.raises(ValueError, match="shape"):
        interp.invoke(np.zeros((1, 2), dtype=np.int8))
    with pytest.raises(ValueError, match="float"):
        interp.invoke(np.zeros((1, 1), dtype=np.float32))
    with pytest.raises(ValueError, match="range"):
        interp.invoke(np.array([[300]]))
    assert interp.invoke(np.array([[5]])).dtype == np.int8  # in-range ints are accepted


@pytest.mark.parametrize(
    "stem,where,name",
    [
        ("keyword_scrambled_8bit", "operator 1", "SVDF"),
        ("mnist_lstm_trained_lstm_int8", "operator 0", "UNIDIRECTIONAL_SEQUENCE_LSTM"),
        ("audio_preprocessor_int8", "operator 0", "SignalWindow"),
    ],
)
def test_unsupported_op_is_named(stem, where, name):
    model = load_model(model_path(stem))
    with pytest.raises(UnsupportedOpError, match=rf"{where} \({name}\)") as info:
        ArenaInterpreter(model, plan_model(model))
    assert isinstance(info.value, ValueError)
    assert name in str(info.value)


def test_float_model_is_refused_with_the_reason():
    model = load_model(model_path("hello_world_float"))
    with pytest.raises(UnsupportedOpError, match=r"operator 0 \(FULLY_CONNECTED\).*float32"):
        ArenaInterpreter(model, plan_model(model))


def test_plan_of_another_model_is_refused():
    model = load_model(model_path("person_detect"))
    other = plan_model(load_model(model_path("hello_world_int8")))
    with pytest.raises(ValueError):
        ArenaInterpreter(model, other)


def test_supported_ops_cover_the_issue_list():
    assert set(supported_ops()) >= {
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "FULLY_CONNECTED",
        "AVERAGE_POOL_2D",
        "MAX_POOL_2D",
        "RESHAPE",
        "SOFTMAX",
        "ADD",
        "QUANTIZE",
        "DEQUANTIZE",
    }


def test_op_macs_by_hand():
    hello = load_model(model_path("hello_world_int8"))
    assert [op_macs(hello, i) for i in range(3)] == [16, 256, 16]
    speech = load_model(model_path("micro_speech_quantized"))
    # RESHAPE; depthwise 25x20x8 outputs x 10x8 taps; FC 4 x 4000; softmax over 4
    assert [op_macs(speech, i) for i in range(4)] == [0, 25 * 20 * 8 * 80, 4 * 4000, 4]
    person = load_model(model_path("person_detect"))
    assert op_macs(person, 0) == 48 * 48 * 8 * 9  # depthwise 3x3, multiplier 8
    assert op_macs(person, 2) == 48 * 48 * 16 * 8  # 1x1 conv, 8 -> 16 channels
    assert op_macs(person, 27) == 256 * 9  # average pool 3x3 over one output pixel
    assert op_macs(person, 29) == 0  # RESHAPE
    total = sum(op_macs(person, i) for i in range(len(person.operators)))
    assert 7_000_000 < total < 8_000_000  # MobileNet-v1 0.25 at 96x96 is ~7.5M MACs
