"""Every kernel against TensorFlow Lite Micro itself, on one-operator models built here.

The three shared models only reach some kernel configurations (1x1 convolutions, one
depthwise multiplier, VALID pooling, no ADD/QUANTIZE/DEQUANTIZE/MAX_POOL). These tests
write small `.tflite` flatbuffers with `tflite_builder.one_op_model` (3x3 and dilated
convolutions, SAME padding at the borders, grouped channels, per-tensor and per-channel
filters, every fused activation, broadcast ADD, float QUANTIZE, ...), run them in the
`tflite-micro` wheel and in the arena interpreter, and require equal bytes.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

# TFLM itself is the reference (the test extra installs it): its absence fails.
from tflite_micro.python.tflite_micro import runtime  # noqa: E402

from inferlab.engines.mcu.graph import load_model  # noqa: E402
from inferlab.engines.mcu.interpreter import ArenaInterpreter  # noqa: E402
from inferlab.engines.mcu.kernels import common  # noqa: E402
from inferlab.engines.mcu.model_planners import plan_model  # noqa: E402
from tests.engines.mcu.tflite_builder import ACT, PADDING, one_op_model  # noqa: E402


def assert_matches_tflm(data: bytes, inputs_by_seed, planner: str = "tflm-greedy") -> None:
    """Run the model on each input list in TFLM and in the arena interpreter, the latter
    twice: with its usual bands of output rows and with one row (one channel) per band,
    so that every band edge meets padding, stride and dilation."""
    model = load_model(data)
    ours = ArenaInterpreter(model, plan_model(model, planner))
    ref = runtime.Interpreter.from_bytes(data, arena_size=64 * 1024)
    for feed in inputs_by_seed:
        for k, x in enumerate(feed):
            ref.set_input(x, k)
        ref.invoke()
        want = ref.get_output(0)
        for budget in (common.BAND_VALUES, 1):
            saved, common.BAND_VALUES = common.BAND_VALUES, budget
            try:
                got = ours.invoke(feed if len(feed) > 1 else feed[0])
            finally:
                common.BAND_VALUES = saved
            assert got.dtype == want.dtype
            assert np.array_equal(got, want.reshape(got.shape)), (
                budget,
                got.ravel()[:16],
                want.ravel()[:16],
            )


def _int8(rng, shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


def _feeds(rng, shapes, n=3, dtype="int8"):
    out = []
    for _ in range(n):
        if dtype == "float32":
            out.append([rng.normal(0, 3, size=s).astype(np.float32) for s in shapes])
        else:
            out.append([_int8(rng, s) for s in shapes])
    return out


def _q(scale, zp):
    return {"scale": [scale], "zp": [zp]}


# ---- CONV_2D ------------------------------------------------------------------------------

CONV_CASES = [
    # (input HWC, filter KH KW, Cout, stride, dilation, padding, act, per-channel, groups)
    ((7, 7, 3), (3, 3), 5, (2, 2), (1, 1), "SAME", "RELU6", True, 1),
    ((8, 6, 4), (3, 2), 3, (1, 2), (1, 1), "VALID", "NONE", False, 1),
    ((9, 9, 2), (3, 3), 4, (1, 1), (2, 2), "SAME", "RELU", True, 1),
    ((6, 6, 4), (1, 1), 6, (1, 1), (1, 1), "SAME", "RELU_N1_TO_1", True, 2),
    ((5, 5, 8), (5, 5), 2, (3, 3), (1, 1), "SAME", "NONE", True, 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}k{c[1]}s{c[3]}d{c[4]}{c[5]}")
def test_conv2d_matches_tflm(case):
    (h, w, cin), (kh, kw), cout, (sh, sw), (dh, dw), padding, act, per_channel, groups = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    from inferlab.engines.mcu.kernels.common import out_size

    oh, ow = out_size(padding, h, kh, sh, dh), out_size(padding, w, kw, sw, dw)
    f_scales = list(rng.uniform(0.002, 0.02, cout)) if per_channel else [0.011]
    tensors = [
        {"shape": (1, h, w, cin), "dtype": "int8", **_q(0.05, int(rng.integers(-20, 20)))},
        {
            "shape": (cout, kh, kw, cin // groups),
            "dtype": "int8",
            "scale": f_scales,
            "zp": [0] * len(f_scales),
            "data": _int8(rng, (cout, kh, kw, cin // groups)),
        },
        {
            "shape": (cout,),
            "dtype": "int32",
            "scale": [0.05 * s for s in f_scales],
            "zp": [0] * len(f_scales),
            "data": rng.integers(-3000, 3000, cout).astype(np.int32),
        },
        {"shape": (1, oh, ow, cout), "dtype": "int8", **_q(0.04, int(rng.integers(-10, 10)))},
    ]
    opts = {
        "Padding": PADDING[padding],
        "StrideW": sw,
        "StrideH": sh,
        "FusedActivationFunction": ACT[act],
        "DilationWFactor": dw,
        "DilationHFactor": dh,
    }
    data = one_op_model(tensors, "CONV_2D", opts, [0, 1, 2], [3])
    assert_matches_tflm(data, _feeds(rng, [(1, h, w, cin)]))


def test_conv2d_without_bias_matches_tflm():
    rng = np.random.default_rng(7)
    tensors = [
        {"shape": (1, 5, 5, 2), "dtype": "int8", **_q(0.1, 3)},
        {
            "shape": (3, 3, 3, 2),
            "dtype": "int8",
            "scale": [0.01, 0.02, 0.03],
            "zp": [0, 0, 0],
            "data": _int8(rng, (3, 3, 3, 2)),
        },
        {"shape": (1, 5, 5, 3), "dtype": "int8", **_q(0.2, -5)},
    ]
    opts = {"Padding": 0, "StrideW": 1, "StrideH": 1, "FusedActivationFunction": 0}
    data = one_op_model(tensors, "CONV_2D", opts, [0, 1, -1], [2])
    assert_matches_tflm(data, _feeds(rng, [(1, 5, 5, 2)]))


# ---- DEPTHWISE_CONV_2D ---------------------------------------------------------------------

DW_CASES = [
    # (input HWC, KH KW, multiplier, stride, dilation, padding, act)
    ((7, 7, 3), (3, 3), 2, (1, 1), (1, 1), "SAME", "RELU"),
    ((9, 8, 4), (3, 3), 1, (2, 2), (1, 1), "SAME", "RELU6"),
    ((10, 10, 2), (3, 3), 3, (1, 1), (2, 2), "VALID", "NONE"),
    ((12, 5, 1), (4, 2), 8, (2, 2), (1, 1), "SAME", "RELU"),
]


@pytest.mark.parametrize("case", DW_CASES, ids=lambda c: f"{c[0]}k{c[1]}m{c[2]}s{c[3]}d{c[4]}")
def test_depthwise_matches_tflm(case):
    (h, w, cin), (kh, kw), mult, (sh, sw), (dh, dw), padding, act = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    from inferlab.engines.mcu.kernels.common import out_size

    cout = cin * mult
    oh, ow = out_size(padding, h, kh, sh, dh), out_size(padding, w, kw, sw, dw)
    f_scales = list(rng.uniform(0.002, 0.03, cout))
    tensors = [
        {"shape": (1, h, w, cin), "dtype": "int8", **_q(0.03, int(rng.integers(-128, 0)))},
        {
            "shape": (1, kh, kw, cout),
            "dtype": "int8",
            "scale": f_scales,
            "zp": [0] * cout,
            "qdim": 3,
            "data": _int8(rng, (1, kh, kw, cout)),
        },
        {
            "shape": (cout,),
            "dtype": "int32",
            "scale": [0.03 * s for s in f_scales],
            "zp": [0] * cout,
            "data": rng.integers(-2000, 2000, cout).astype(np.int32),
        },
        {"shape": (1, oh, ow, cout), "dtype": "int8", **_q(0.02, -128)},
    ]
    opts = {
        "Padding": PADDING[padding],
        "StrideW": sw,
        "StrideH": sh,
        "DepthMultiplier": mult,
        "FusedActivationFunction": ACT[act],
        "DilationWFactor": dw,
        "DilationHFactor": dh,
    }
    data = one_op_model(tensors, "DEPTHWISE_CONV_2D", opts, [0, 1, 2], [3])
    assert_matches_tflm(data, _feeds(rng, [(1, h, w, cin)]))


# ---- FULLY_CONNECTED -----------------------------------------------------------------------


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act", ["NONE", "RELU"])
def test_fully_connected_matches_tflm(per_channel, act):
    rng = np.random.default_rng(11 + per_channel + 2 * (act == "RELU"))
    units, depth, batches = 7, 40, 3
    f_scales = list(rng.uniform(0.001, 0.01, units)) if per_channel else [0.0042]
    tensors = [
        {"shape": (batches, depth), "dtype": "int8", **_q(0.07, 12)},
        {
            "shape": (units, depth),
            "dtype": "int8",
            "scale": f_scales,
            "zp": [0] * len(f_scales),
            "data": _int8(rng, (units, depth)),
        },
        {
            "shape": (units,),
            "dtype": "int32",
            "scale": [0.07 * s for s in f_scales],
            "zp": [0] * len(f_scales),
            "data": rng.integers(-5000, 5000, units).astype(np.int32),
        },
        {"shape": (batches, units), "dtype": "int8", **_q(0.09, -7)},
    ]
    opts = {"FusedActivationFunction": ACT[act]}
    data = one_op_model(tensors, "FULLY_CONNECTED", opts, [0, 1, 2], [3])
    assert_matches_tflm(data, _feeds(rng, [(batches, depth)]))


# ---- pooling -------------------------------------------------------------------------------

POOL_CASES = [
    ("AVERAGE_POOL_2D", (7, 7, 3), (3, 3), (2, 2), "SAME", "NONE"),
    ("AVERAGE_POOL_2D", (6, 5, 2), (2, 3), (1, 2), "VALID", "RELU"),
    ("AVERAGE_POOL_2D", (5, 5, 4), (4, 4), (3, 3), "SAME", "RELU6"),
    ("MAX_POOL_2D", (7, 7, 3), (3, 3), (2, 2), "SAME", "RELU6"),
    ("MAX_POOL_2D", (8, 6, 2), (2, 2), (2, 2), "VALID", "NONE"),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}{c[1]}k{c[2]}s{c[3]}{c[4]}")
def test_pooling_matches_tflm(case):
    op, (h, w, c), (fh, fw), (sh, sw), padding, act = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    from inferlab.engines.mcu.kernels.common import out_size

    oh, ow = out_size(padding, h, fh, sh), out_size(padding, w, fw, sw)
    q = _q(0.05, 9)
    tensors = [
        {"shape": (1, h, w, c), "dtype": "int8", **q},
        {"shape": (1, oh, ow, c), "dtype": "int8", **q},
    ]
    opts = {
        "Padding": PADDING[padding],
        "StrideW": sw,
        "StrideH": sh,
        "FilterWidth": fw,
        "FilterHeight": fh,
        "FusedActivationFunction": ACT[act],
    }
    data = one_op_model(tensors, op, opts, [0], [1])
    assert_matches_tflm(data, _feeds(rng, [(1, h, w, c)], n=4))


# ---- SOFTMAX, ADD, QUANTIZE, DEQUANTIZE -----------------------------------------------------


@pytest.mark.parametrize("scale,beta", [(0.1, 1.0), (0.0390625, 1.0), (0.5, 0.5), (1.7, 1.0)])
def test_softmax_matches_tflm(scale, beta):
    rng = np.random.default_rng(int(scale * 1000))
    tensors = [
        {"shape": (3, 10), "dtype": "int8", **_q(scale, 4)},
        {"shape": (3, 10), "dtype": "int8", **_q(1.0 / 256, -128)},
    ]
    data = one_op_model(tensors, "SOFTMAX", {"Beta": beta}, [0], [1])
    feeds = _feeds(rng, [(3, 10)], n=4)
    feeds.append([np.full((3, 10), 100, dtype=np.int8)])  # ties everywhere
    assert_matches_tflm(data, feeds)


@pytest.mark.parametrize(
    "shapes,act",
    [
        (((1, 4, 4, 3), (1, 4, 4, 3)), "NONE"),
        (((1, 4, 4, 3), (1, 1, 1, 3)), "RELU"),
        (((2, 5), (2, 5)), "RELU6"),
    ],
)
def test_add_matches_tflm(shapes, act):
    rng = np.random.default_rng(len(shapes[1]) * 31 + len(act))
    a, b = shapes
    out_shape = np.broadcast_shapes(a, b)
    tensors = [
        {"shape": a, "dtype": "int8", **_q(0.031, -3)},
        {"shape": b, "dtype": "int8", **_q(0.017, 20)},
        {"shape": out_shape, "dtype": "int8", **_q(0.045, 1)},
    ]
    data = one_op_model(tensors, "ADD", {"FusedActivationFunction": ACT[act]}, [0, 1], [2])
    assert_matches_tflm(data, _feeds(rng, [a, b]))


def test_quantize_float_to_int8_matches_tflm():
    rng = np.random.default_rng(5)
    tensors = [
        {"shape": (4, 16), "dtype": "float32"},
        {"shape": (4, 16), "dtype": "int8", **_q(0.05, -3)},
    ]
    data = one_op_model(tensors, "QUANTIZE", {}, [0], [1])
    feeds = _feeds(rng, [(4, 16)], dtype="float32")
    # exact halves of the scale, positive and negative, and values that saturate
    halves = (np.arange(64, dtype=np.float32) - 32) * np.float32(0.025)
    feeds.append([halves.reshape(4, 16)])
    feeds.append([np.linspace(-20, 20, 64, dtype=np.float32).reshape(4, 16)])
    assert_matches_tflm(data, feeds)


def test_requantize_int8_to_int8_matches_tflm():
    rng = np.random.default_rng(6)
    tensors = [
        {"shape": (2, 32), "dtype": "int8", **_q(0.03, 5)},
        {"shape": (2, 32), "dtype": "int8", **_q(0.011, -9)},
    ]
    data = one_op_model(tensors, "QUANTIZE", {}, [0], [1])
    assert_matches_tflm(data, _feeds(rng, [(2, 32)]))


def test_dequantize_matches_tflm():
    rng = np.random.default_rng(8)
    tensors = [
        {"shape": (2, 32), "dtype": "int8", **_q(0.0123, -17)},
        {"shape": (2, 32), "dtype": "float32"},
    ]
    data = one_op_model(tensors, "DEQUANTIZE", {}, [0], [1])
    assert_matches_tflm(data, _feeds(rng, [(2, 32)]))


def test_quantize_rounds_ties_away_from_zero_like_tflm():
    tensors = [
        {"shape": (1, 12), "dtype": "float32"},
        {"shape": (1, 12), "dtype": "int8", **_q(1.0, 0)},
    ]
    data = one_op_model(tensors, "QUANTIZE", {}, [0], [1])
    below_half = np.nextafter(np.float32(0.5), np.float32(0))  # 0.49999997: rounds to 0
    x = np.array(
        [[0.5, -0.5, 1.5, -1.5, 2.5, -2.5, below_half, -below_half, 126.5, -128.5, 1e9, -1e9]],
        dtype=np.float32,
    )
    assert_matches_tflm(data, [[x]])


def test_softmax_int8_to_int16_matches_tflm():
    rng = np.random.default_rng(99)
    tensors = [
        {"shape": (2, 12), "dtype": "int8", **_q(0.08, -3)},
        {"shape": (2, 12), "dtype": "int16", **_q(1.0 / 65536, -32768)},
    ]
    data = one_op_model(tensors, "SOFTMAX", {"Beta": 1.0}, [0], [1])
    assert_matches_tflm(data, _feeds(rng, [(2, 12)], n=4))
