"""Seeded random one-operator models for every firmware kernel, with inputs.

Each case is (name, .tflite bytes, feeds): written with the MCU lab's test flatbuffer
writer (`tests/engines/mcu/tflite_builder.one_op_model`), in the configurations TFLM
accepts (symmetric int8 filters, the softmax output quantization TFLM requires).
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.mcu.kernels.common import out_size
from tests.engines.mcu.tflite_builder import ACT, PADDING, one_op_model

ACTS = tuple(ACT)


def _q(scale, zp):
    return {"scale": [float(scale)], "zp": [int(zp)]}


def _ints(rng, shape, dtype="int8"):
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64).astype(dtype)


def _feeds(rng, shapes, dtypes, n=3):
    out = []
    for _ in range(n):
        feed = []
        for shape, dt in zip(shapes, dtypes, strict=True):
            if dt == "float32":
                feed.append(rng.normal(0, 3, size=shape).astype(np.float32))
            else:
                feed.append(_ints(rng, shape, dt))
        out.append(feed)
    return out


def _geometry(rng, depthwise: bool):
    while True:
        h, w = int(rng.integers(3, 10)), int(rng.integers(3, 10))
        kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        dh, dw = (int(rng.integers(1, 3)), int(rng.integers(1, 3))) if rng.random() < 0.4 \
            else (1, 1)
        padding = "SAME" if rng.random() < 0.6 else "VALID"
        oh, ow = out_size(padding, h, kh, sh, dh), out_size(padding, w, kw, sw, dw)
        if oh > 0 and ow > 0:
            return h, w, kh, kw, sh, sw, dh, dw, padding, oh, ow


def conv_case(rng, k):
    h, w, kh, kw, sh, sw, dh, dw, padding, oh, ow = _geometry(rng, False)
    groups = 2 if rng.random() < 0.3 else 1
    cin = groups * int(rng.integers(1, 5))
    cout = groups * int(rng.integers(1, 5))
    batches = int(rng.integers(1, 3))
    per_channel = rng.random() < 0.7
    f_scales = list(rng.uniform(0.002, 0.03, cout)) if per_channel else [0.011]
    in_scale = float(rng.uniform(0.01, 0.1))
    act = ACTS[k % len(ACTS)]
    with_bias = rng.random() < 0.85
    tensors = [
        {"shape": (batches, h, w, cin), "dtype": "int8",
         **_q(in_scale, rng.integers(-30, 30))},
        {"shape": (cout, kh, kw, cin // groups), "dtype": "int8", "scale": f_scales,
         "zp": [0] * len(f_scales), "data": _ints(rng, (cout, kh, kw, cin // groups))},
        {"shape": (cout,), "dtype": "int32", "scale": [in_scale * s for s in f_scales],
         "zp": [0] * len(f_scales), "data": rng.integers(-4000, 4000, cout).astype(np.int32)},
        {"shape": (batches, oh, ow, cout), "dtype": "int8",
         **_q(rng.uniform(0.02, 0.2), rng.integers(-20, 20))},
    ]
    opts = {"Padding": PADDING[padding], "StrideW": sw, "StrideH": sh,
            "FusedActivationFunction": ACT[act], "DilationWFactor": dw, "DilationHFactor": dh}
    inputs = [0, 1, 2] if with_bias else [0, 1, -1]
    data = one_op_model(tensors, "CONV_2D", opts, inputs, [3])
    return f"conv{k}", data, _feeds(rng, [(batches, h, w, cin)], ["int8"])


def depthwise_case(rng, k):
    h, w, kh, kw, sh, sw, dh, dw, padding, oh, ow = _geometry(rng, True)
    cin, mult = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    cout = cin * mult
    f_scales = list(rng.uniform(0.002, 0.03, cout))
    in_scale = float(rng.uniform(0.01, 0.1))
    tensors = [
        {"shape": (1, h, w, cin), "dtype": "int8", **_q(in_scale, rng.integers(-128, 0))},
        {"shape": (1, kh, kw, cout), "dtype": "int8", "scale": f_scales, "zp": [0] * cout,
         "qdim": 3, "data": _ints(rng, (1, kh, kw, cout))},
        {"shape": (cout,), "dtype": "int32", "scale": [in_scale * s for s in f_scales],
         "zp": [0] * cout, "data": rng.integers(-2000, 2000, cout).astype(np.int32)},
        {"shape": (1, oh, ow, cout), "dtype": "int8", **_q(rng.uniform(0.01, 0.1), -128)},
    ]
    opts = {"Padding": PADDING[padding], "StrideW": sw, "StrideH": sh, "DepthMultiplier": mult,
            "FusedActivationFunction": ACT[ACTS[k % len(ACTS)]], "DilationWFactor": dw,
            "DilationHFactor": dh}
    data = one_op_model(tensors, "DEPTHWISE_CONV_2D", opts, [0, 1, 2], [3])
    return f"depthwise{k}", data, _feeds(rng, [(1, h, w, cin)], ["int8"])


def fully_connected_case(rng, k):
    units, depth, batches = int(rng.integers(1, 10)), int(rng.integers(1, 60)), \
        int(rng.integers(1, 4))
    per_channel = k % 2 == 1
    f_scales = list(rng.uniform(0.001, 0.01, units)) if per_channel else [0.0042]
    tensors = [
        {"shape": (batches, depth), "dtype": "int8", **_q(0.07, rng.integers(-20, 20))},
        {"shape": (units, depth), "dtype": "int8", "scale": f_scales, "zp": [0] * len(f_scales),
         "data": _ints(rng, (units, depth))},
        {"shape": (units,), "dtype": "int32", "scale": [0.07 * s for s in f_scales],
         "zp": [0] * len(f_scales), "data": rng.integers(-5000, 5000, units).astype(np.int32)},
        {"shape": (batches, units), "dtype": "int8", **_q(rng.uniform(0.05, 0.3), -7)},
    ]
    opts = {"FusedActivationFunction": ACT[ACTS[k % 2]]}
    data = one_op_model(tensors, "FULLY_CONNECTED", opts, [0, 1, 2], [3])
    return f"fully_connected{k}", data, _feeds(rng, [(batches, depth)], ["int8"])


def pool_case(rng, k):
    op = "AVERAGE_POOL_2D" if k % 2 == 0 else "MAX_POOL_2D"
    while True:
        h, w, c = int(rng.integers(2, 9)), int(rng.integers(2, 9)), int(rng.integers(1, 5))
        fh, fw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        padding = "SAME" if rng.random() < 0.5 else "VALID"
        oh, ow = out_size(padding, h, fh, sh), out_size(padding, w, fw, sw)
        if oh > 0 and ow > 0:
            break
    q = _q(0.05, rng.integers(-10, 10))
    tensors = [{"shape": (1, h, w, c), "dtype": "int8", **q},
               {"shape": (1, oh, ow, c), "dtype": "int8", **q}]
    opts = {"Padding": PADDING[padding], "StrideW": sw, "StrideH": sh, "FilterWidth": fw,
            "FilterHeight": fh, "FusedActivationFunction": ACT[ACTS[k % len(ACTS)]]}
    data = one_op_model(tensors, op, opts, [0], [1])
    return f"{op.lower()}{k}", data, _feeds(rng, [(1, h, w, c)], ["int8"], n=4)


def softmax_case(rng, k, rows=None, depth=None, out_dtype=None, scale=None):
    rows = rows or int(rng.integers(1, 4))
    depth = depth or int(rng.integers(2, 40))
    out_dtype = out_dtype or ("int16" if k % 3 == 2 else "int8")
    scale = scale or float(rng.uniform(0.02, 1.8))
    out_q = _q(1.0 / 256, -128) if out_dtype == "int8" else _q(1.0 / 65536, -32768)
    tensors = [{"shape": (rows, depth), "dtype": "int8", **_q(scale, rng.integers(-10, 10))},
               {"shape": (rows, depth), "dtype": out_dtype, **out_q}]
    beta = 1.0 if k % 2 == 0 else 0.5
    data = one_op_model(tensors, "SOFTMAX", {"Beta": beta}, [0], [1])
    feeds = _feeds(rng, [(rows, depth)], ["int8"], n=3)
    feeds.append([np.full((rows, depth), 100, dtype=np.int8)])  # ties: the sum is largest
    return f"softmax{k}", data, feeds


def add_case(rng, k, a, b):
    out = np.broadcast_shapes(a, b)
    tensors = [{"shape": a, "dtype": "int8", **_q(rng.uniform(0.01, 0.05), -3)},
               {"shape": b, "dtype": "int8", **_q(rng.uniform(0.01, 0.05), 20)},
               {"shape": out, "dtype": "int8", **_q(rng.uniform(0.03, 0.09), 1)}]
    opts = {"FusedActivationFunction": ACT[ACTS[k % len(ACTS)]]}
    data = one_op_model(tensors, "ADD", opts, [0, 1], [2])
    return f"add{k}", data, _feeds(rng, [a, b], ["int8", "int8"])


def quantize_case(rng, k, in_dtype, out_dtype):
    shape = (3, 20)
    qin = {} if in_dtype == "float32" else _q(rng.uniform(0.005, 0.05), rng.integers(-20, 20))
    qout = {} if out_dtype == "float32" else _q(rng.uniform(0.005, 0.05), rng.integers(-20, 20))
    op = "DEQUANTIZE" if out_dtype == "float32" else "QUANTIZE"
    tensors = [{"shape": shape, "dtype": in_dtype, **qin},
               {"shape": shape, "dtype": out_dtype, **qout}]
    data = one_op_model(tensors, op, {}, [0], [1])
    feeds = _feeds(rng, [shape], [in_dtype])
    if in_dtype == "float32":  # exact halves of the scale, and values that saturate
        s = np.float32(tensors[1]["scale"][0])
        feeds.append([((np.arange(60, dtype=np.float32) - 30) * s / np.float32(2))
                      .reshape(shape)])
        feeds.append([np.linspace(-1e4, 1e4, 60, dtype=np.float32).reshape(shape)])
    return f"{op.lower()}_{in_dtype}_{out_dtype}{k}", data, feeds


def all_cases(seed: int = 20260829) -> list[tuple[str, bytes, list]]:
    rng = np.random.default_rng(seed)
    cases = [conv_case(rng, k) for k in range(10)]
    cases += [depthwise_case(rng, k) for k in range(8)]
    cases += [fully_connected_case(rng, k) for k in range(4)]
    cases += [pool_case(rng, k) for k in range(8)]
    cases += [softmax_case(rng, k) for k in range(6)]
    cases.append(softmax_case(rng, 6, rows=2, depth=700, out_dtype="int8", scale=0.05))
    cases.append(softmax_case(rng, 7, rows=1, depth=700, out_dtype="int16", scale=0.05))
    shapes = [((1, 4, 4, 3), (1, 4, 4, 3)), ((1, 4, 4, 3), (1, 1, 1, 3)), ((2, 5), (5,)),
              ((3, 1, 4), (1, 2, 1))]
    cases += [add_case(rng, k, a, b) for k, (a, b) in enumerate(shapes)]
    pairs = [("float32", "int8"), ("float32", "int16"), ("int8", "int8"), ("int8", "int16"),
             ("int16", "int8"), ("int8", "float32"), ("int16", "float32")]
    cases += [quantize_case(rng, k, a, b) for k, (a, b) in enumerate(pairs)]
    return cases
