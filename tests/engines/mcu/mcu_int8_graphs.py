"""Multi-operator int8 `.tflite` graphs for the aliasing, reordering and patching tests.

`Int8Graph` builds a model layer by layer with seeded random weights and output scales
chosen so that activations spread over the int8 range (not all saturated), then writes it
with `tflite_builder.write_tflite`. Both the tflite-micro wheel and the arena
interpreter run what it writes. `random_branchy_graph(seed)` makes a small CNN whose
tensors branch and join again (ADD), the kind of graph operator order matters for.
"""

from __future__ import annotations

import math
import random

import numpy as np

from tests.engines.mcu.tflite_builder import ACT, PADDING, write_tflite

_INT8_STD = 74.0  # standard deviation of uniform int8 values


def out_size(padding: str, n: int, k: int, stride: int, dilation: int = 1) -> int:
    eff = (k - 1) * dilation + 1
    return (n + stride - 1) // stride if padding == "SAME" else (n + stride - eff) // stride


class Int8Graph:
    """A graph under construction: tensors (dicts) and operators, seeded weights."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.tensors: list[dict] = []
        self.ops: list[dict] = []
        self.inputs: list[int] = []

    # ---- tensors ------------------------------------------------------------------------

    def tensor(self, shape, dtype="int8", scale=None, zp=0, data=None, qdim=0) -> int:
        t = {"shape": tuple(int(d) for d in shape), "dtype": dtype, "data": data, "qdim": qdim}
        if scale is not None:
            t["scale"] = list(np.atleast_1d(scale).astype(float))
            t["zp"] = (
                list(np.atleast_1d(zp).astype(int)) if np.ndim(zp) else [int(zp)] * len(t["scale"])
            )
        self.tensors.append(t)
        return len(self.tensors) - 1

    def input(self, shape, scale=0.05, zp=0) -> int:
        t = self.tensor(shape, scale=scale, zp=zp)
        self.inputs.append(t)
        return t

    def shape(self, t: int) -> tuple[int, ...]:
        return self.tensors[t]["shape"]

    def scale(self, t: int) -> float:
        return self.tensors[t]["scale"][0]

    def _int8(self, shape):
        return self.rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)

    def _activation_out(self, shape, x: int, w_scale: float, taps: int) -> int:
        spread = math.sqrt(max(1, taps)) * _INT8_STD * _INT8_STD
        out_scale = self.scale(x) * w_scale * spread / 40.0
        return self.tensor(shape, scale=out_scale, zp=int(self.rng.integers(-10, 10)))

    def _op(self, op: str, inputs, outputs, **options) -> int:
        self.ops.append({"op": op, "inputs": list(inputs), "outputs": list(outputs),
                         "options": options})  # fmt: skip
        return outputs[0]

    # ---- layers -------------------------------------------------------------------------

    def conv(self, x, cout, k=1, stride=1, padding="SAME", dilation=1, act="NONE") -> int:
        n, h, w, cin = self.shape(x)
        oh, ow = (
            out_size(padding, h, k, stride, dilation),
            out_size(padding, w, k, stride, dilation),
        )
        w_scales = self.rng.uniform(0.002, 0.02, cout)
        wt = self.tensor((cout, k, k, cin), scale=w_scales, zp=np.zeros(cout, int),
                         data=self._int8((cout, k, k, cin)))  # fmt: skip
        bias = self.tensor((cout,), "int32", scale=self.scale(x) * w_scales, zp=np.zeros(cout, int),
                           data=self.rng.integers(-2000, 2000, cout).astype(np.int32))  # fmt: skip
        y = self._activation_out((n, oh, ow, cout), x, float(w_scales.mean()), k * k * cin)
        return self._op("CONV_2D", [x, wt, bias], [y], Padding=PADDING[padding], StrideW=stride,
                        StrideH=stride, DilationWFactor=dilation, DilationHFactor=dilation,
                        FusedActivationFunction=ACT[act])  # fmt: skip

    def dw(self, x, k=3, stride=1, multiplier=1, padding="SAME", dilation=1, act="NONE") -> int:
        n, h, w, cin = self.shape(x)
        cout = cin * multiplier
        oh, ow = (
            out_size(padding, h, k, stride, dilation),
            out_size(padding, w, k, stride, dilation),
        )
        w_scales = self.rng.uniform(0.002, 0.02, cout)
        wt = self.tensor((1, k, k, cout), scale=w_scales, zp=np.zeros(cout, int),
                         data=self._int8((1, k, k, cout)), qdim=3)  # fmt: skip
        bias = self.tensor((cout,), "int32", scale=self.scale(x) * w_scales, zp=np.zeros(cout, int),
                           data=self.rng.integers(-2000, 2000, cout).astype(np.int32))  # fmt: skip
        y = self._activation_out((n, oh, ow, cout), x, float(w_scales.mean()), k * k)
        return self._op("DEPTHWISE_CONV_2D", [x, wt, bias], [y], Padding=PADDING[padding],
                        StrideW=stride, StrideH=stride, DepthMultiplier=multiplier,
                        DilationWFactor=dilation, DilationHFactor=dilation,
                        FusedActivationFunction=ACT[act])  # fmt: skip

    def pool(self, x, kind="MAX_POOL_2D", k=2, stride=2, padding="VALID", act="NONE") -> int:
        n, h, w, c = self.shape(x)
        oh, ow = out_size(padding, h, k, stride), out_size(padding, w, k, stride)
        t = self.tensors[x]
        y = self.tensor((n, oh, ow, c), scale=t["scale"][0], zp=t["zp"][0])
        return self._op(kind, [x], [y], Padding=PADDING[padding], StrideW=stride, StrideH=stride,
                        FilterWidth=k, FilterHeight=k, FusedActivationFunction=ACT[act])  # fmt: skip

    def add(self, a, b) -> int:
        y = self.tensor(self.shape(a), scale=1.5 * max(self.scale(a), self.scale(b)),
                        zp=int(self.rng.integers(-5, 5)))  # fmt: skip
        return self._op("ADD", [a, b], [y], FusedActivationFunction=0)

    def reshape(self, x, shape) -> int:
        t = self.tensors[x]
        new = self.tensor((len(shape),), "int32", data=np.array(shape, dtype=np.int32))
        y = self.tensor(shape, scale=t["scale"][0], zp=t["zp"][0])
        return self._op("RESHAPE", [x, new], [y])

    def softmax(self, x) -> int:
        y = self.tensor(self.shape(x), scale=1 / 256, zp=-128)
        return self._op("SOFTMAX", [x], [y], Beta=1.0)

    def fully_connected(self, x, units) -> int:
        cin = self.shape(x)[-1]
        wt = self.tensor((units, cin), scale=0.01, zp=0, data=self._int8((units, cin)))
        bias = self.tensor((units,), "int32", scale=self.scale(x) * 0.01, zp=0,
                           data=self.rng.integers(-2000, 2000, units).astype(np.int32))  # fmt: skip
        y = self._activation_out((self.shape(x)[0], units), x, 0.01, cin)
        return self._op("FULLY_CONNECTED", [x, wt, bias], [y], FusedActivationFunction=0)

    # ---- writing ------------------------------------------------------------------------

    def build(self, outputs) -> bytes:
        return write_tflite(self.tensors, self.ops, self.inputs, list(outputs),
                            description="inferlab test graph")  # fmt: skip


def random_branchy_graph(seed: int, n_ops: int | None = None) -> bytes:
    """A small int8 CNN with branches that join again: 1x1 convolutions (to assorted
    widths), 3x3 depthwise convolutions, 3x3 max pools and ADDs of equal-shape tensors,
    each reading a random earlier tensor; the last tensor (and sometimes an earlier one)
    are the outputs. Every tensor is (1, H, H, C), so any two of equal width can be added."""
    rng = random.Random(seed)
    g = Int8Graph(seed)
    size = rng.randint(3, 7)
    x = g.input((1, size, size, rng.choice((2, 4, 8))), scale=0.05, zp=rng.randint(-5, 5))
    live = [x]
    for _ in range(n_ops if n_ops is not None else rng.randint(3, 12)):
        src = rng.choice(live[-5:])
        kind = rng.choice(("conv", "conv", "dw", "pool", "add"))
        if kind == "add":
            width = g.shape(src)[-1]
            mates = [t for t in live if t != src and g.shape(t)[-1] == width]
            if mates:
                live.append(g.add(src, rng.choice(mates)))
                continue
            kind = "conv"
        if kind == "conv":
            live.append(
                g.conv(src, rng.choice((2, 4, 8, 16, 32)), act=rng.choice(("NONE", "RELU")))
            )
        elif kind == "dw":
            live.append(g.dw(src, k=3, act="RELU6"))
        else:
            live.append(g.pool(src, "MAX_POOL_2D", k=3, stride=1, padding="SAME"))
    outputs = [live[-1]]
    earlier = [t for t in live[1:-1]]
    if earlier and rng.random() < 0.3:
        outputs.append(rng.choice(earlier))
    return g.build(outputs)
