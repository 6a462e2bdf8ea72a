"""What one aten op costs, from the shapes and dtypes torch.profiler recorded for it.

`aten_op_cost(name, input_dims, input_types)` reads a trace's `Input Dims` and `Input type`
(record_shapes=True) and returns the op's OpCost, by the counting rules of layer_costs.py: a
multiply-add is 2 FLOPs; every operand is read once and every result written once.

- matmuls (aten::mm, addmm, bmm, baddbmm, matmul, linear): C[b×m×n] = A[b×m×k] · B[b×k×n],
  flops = 2·b·m·n·k (a bias or an added input is read, its adds not counted, as torch counts);
  bytes = A + B (+ bias) + C. For mm this is layer_costs.matmul_cost exactly.
- attention (aten::scaled_dot_product_attention and its fused kernels): Q[B,H,L,E],
  K[B,Hkv,S,E], V[B,Hkv,S,Ev], out[B,H,L,Ev]: flops = 2·B·H·L·S·(E + Ev) (Q·Kᵀ and P·V, every
  pair: a causal mask is not taken off, as in torch's flop counter); bytes = Q + K + V (+ mask)
  + out, as a fused kernel moves them.
- elementwise ops (add, mul, silu, ...): the output is the broadcast of the tensor inputs;
  flops = its elements; bytes = the inputs + the output. A copy moves bytes and does no FLOPs.

Anything else (views, reductions, ops with no recorded tensor) is None: no cost is guessed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inferlab.engines.roofline.op_cost import OpCost

TORCH_TYPE_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "long int": 8, "int": 4, "short int": 2, "signed char": 1,
    "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
}
"""Bytes per element of each tensor type torch.profiler names in `Input type`; "Scalar",
"ScalarList", "" and the rest are not tensors."""

MATMULS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                     "aten::linear"})
ATTENTION = frozenset({
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
})
ELEMENTWISE = frozenset(f"aten::{op}{suffix}" for suffix in ("", "_") for op in (
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "pow", "reciprocal",
    "relu", "silu", "gelu", "sigmoid", "tanh", "clamp", "maximum", "minimum", "where", "sin",
    "cos", "square", "threshold", "leaky_relu", "hardtanh", "elu", "sign"))
COPIES = frozenset({"aten::copy_"})


class Tensor:
    """One recorded tensor input: its dims and bytes per element."""

    __slots__ = ("dims", "bytes_per_element")

    def __init__(self, dims: Sequence[int], bytes_per_element: int) -> None:
        self.dims, self.bytes_per_element = tuple(dims), bytes_per_element

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    @property
    def bytes(self) -> int:
        return self.elements * self.bytes_per_element


def tensors(input_dims: Sequence, input_types: Sequence) -> list[Tensor | None]:
    """The inputs in order: a Tensor where the type is a tensor's and the dims a list of ints,
    else None (a scalar, a list argument, an unrecorded input)."""
    out: list[Tensor | None] = []
    for i, dims in enumerate(input_dims):
        kind = input_types[i] if i < len(input_types) else ""
        size = TORCH_TYPE_BYTES.get(kind) if type(kind) is str else None
        ok = (size is not None and type(dims) is list
              and all(type(d) is int and d >= 0 for d in dims))
        out.append(Tensor(dims, size) if ok else None)
    return out


def broadcast(shapes: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """numpy's broadcast of `shapes`, or None where they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-rank, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def matmul_flops_bytes(a: Tensor, b: Tensor, extra: Sequence[Tensor] = ()
                       ) -> tuple[float, float] | None:
    """(flops, bytes) of A @ B with torch.matmul's rules (1-D operands, broadcast batch
    dims); the output has A's element size; `extra` (a bias, an added input) is read once."""
    da, db = a.dims, b.dims
    if not da or not db:
        return None
    m, k = (1, da[0]) if len(da) == 1 else da[-2:]
    k2, n = (db[0], 1) if len(db) == 1 else db[-2:]
    if k != k2:
        return None
    batch_dims = broadcast([da[:-2], db[:-2]])
    if batch_dims is None:
        return None
    batch = math.prod(batch_dims)
    out_bytes = batch * m * n * a.bytes_per_element
    return (2.0 * batch * m * n * k,
            float(a.bytes + b.bytes + sum(t.bytes for t in extra) + out_bytes))


def _matmul(name: str, ts: list[Tensor | None]) -> tuple[float, float] | None:
    if name in ("aten::mm", "aten::bmm", "aten::matmul"):
        if len(ts) >= 2 and ts[0] and ts[1]:
            return matmul_flops_bytes(ts[0], ts[1])
        return None
    if name in ("aten::addmm", "aten::baddbmm"):  # (input, A, B, beta, alpha)
        if len(ts) >= 3 and ts[1] and ts[2]:
            return matmul_flops_bytes(ts[1], ts[2], [ts[0]] if ts[0] else [])
        return None
    # aten::linear(x, weight[n, k], bias): x @ weightᵀ
    if len(ts) >= 2 and ts[0] and ts[1] and len(ts[1].dims) == 2:
        n, k = ts[1].dims
        weight_t = Tensor((k, n), ts[1].bytes_per_element)
        bias = [ts[2]] if len(ts) > 2 and ts[2] else []
        return matmul_flops_bytes(ts[0], weight_t, bias)
    return None


def _attention(ts: list[Tensor | None]) -> tuple[float, float] | None:
    if len(ts) < 3 or not all(ts[:3]) or any(len(t.dims) != 4 for t in ts[:3]):
        return None
    q, k, v = ts[:3]
    b, h, length, e = q.dims
    s, ev = k.dims[2], v.dims[3]
    if k.dims[3] != e or v.dims[2] != s:
        return None
    mask = [ts[3]] if len(ts) > 3 and ts[3] else []
    out_bytes = b * h * length * ev * q.bytes_per_element
    return (2.0 * b * h * length * s * (e + ev),
            float(q.bytes + k.bytes + v.bytes + sum(t.bytes for t in mask) + out_bytes))


def _elementwise(name: str, ts: list[Tensor | None]) -> tuple[float, float] | None:
    present = [t for t in ts if t is not None]
    if not present:
        return None
    if name in COPIES:  # copy_(dst, src): src read, dst written
        return (0.0, float(sum(t.bytes for t in present[:2])))
    shape = broadcast([t.dims for t in present])
    if shape is None:
        return None
    elements = math.prod(shape)
    out_size = max(present, key=lambda t: (t.elements, t.bytes_per_element)).bytes_per_element
    return (float(elements), float(sum(t.bytes for t in present) + elements * out_size))


def aten_op_cost(name: str, input_dims: Sequence, input_types: Sequence) -> OpCost | None:
    """The OpCost of aten op `name` from its recorded `Input Dims` and `Input type`, or None
    for an op these rules do not cost (see the module's docstring)."""
    ts = tensors(input_dims, input_types)
    if name in MATMULS:
        cost = _matmul(name, ts)
    elif name in ATTENTION:
        cost = _attention(ts)
    elif name in ELEMENTWISE or name in COPIES:
        cost = _elementwise(name, ts)
    else:
        return None
    return None if cost is None else OpCost(name, *cost)
