"""The native decoder's kernels as a step's ops: each recorded kernel (`kernels.decoder.
DecoderTiming`) with its FLOPs and bytes from the step's shapes, by the same rules as an aten
op's (`roofline.aten_costs`): activations fp32 (4 bytes), T rows, d model width, Hq / Hkv heads
of width Dh, F the MLP width.

    qkv, o, gate_up, down   matmul_flops_bytes(x [T, in], W [in, out]), W counted at the bytes
                            its kernel reads (codes and scales as held)
    attention               per sequence, the SDPA rule with Q [1, Hq, L, Dh] and K, V
                            [1, Hkv, S, Dh] in the cache's dtype (L its rows, S = its last
                            position + 1): 2·Hq·L·S·2Dh FLOPs (a causal mask not taken off)
    attn_norm, mlp_norm     the elementwise rule over x [T, d], the residual r [T, d] (not in
                            layer 0's first norm), w [d] -> h [T, d]; x written back too
                            where r is added
    rope                    elementwise over the Q and K heads [T, Hq + Hkv, Dh], cos and sin
    silu_mul                elementwise over gate and up [T, F] -> [T, F]
    q_copy, kv_write        copies: Q [T, Hq·Dh]; K and V [T, Hkv, Dh] into the cache's dtype
                            (its INT8 / FP8 scales not counted)
    residual_add            elementwise x [T, d] + r [T, d]
"""

from __future__ import annotations

from inferlab.engines.kernels.decoder import DecoderTiming
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.profile.step_ops import StepOp
from inferlab.engines.roofline.aten_costs import Tensor, aten_op_cost, matmul_flops_bytes

FLOAT = "float"
KV_TYPES = {"f32": "float", "int8": "signed char", "fp8-e4m3": "c10::Float8_e4m3fn"}
NATIVE_LANE = "native decoder"
LINEARS = ("qkv", "o", "gate_up", "down")


def _aten(name: str, dims: list, types: list) -> tuple[float, float]:
    cost = aten_op_cost(name, dims, types)
    if cost is None:  # the shapes are ours: a None is a bug here, not a trace's oddity
        raise ValueError(f"{name} {dims} {types}: no cost")
    return cost.flops, cost.bytes_moved


def linear_cost(t: int, shape) -> tuple[float, float]:
    """(flops, bytes) of a native linear (`kernels.decoder.LinearShape`) on `t` rows."""
    k, n = shape.in_features, shape.out_features
    flops, moved = matmul_flops_bytes(Tensor((t, k), 4), Tensor((k, n), 4))
    return flops, moved - 4.0 * k * n + shape.weight_bytes


def attention_cost(cfg: ModelConfig, timing: DecoderTiming) -> tuple[float, float]:
    """(flops, bytes) of one layer's paged attention over every sequence of the step."""
    h, hkv, dh = cfg.n_heads, cfg.n_kv_heads, cfg.d_head
    kv_type = KV_TYPES[timing.kv_kind]
    flops = moved = 0.0
    starts = timing.query_starts
    for a, b in zip(starts, starts[1:], strict=False):
        if b <= a:
            continue
        rows, keys = b - a, max(timing.positions[a:b]) + 1
        f, m = _aten("aten::scaled_dot_product_attention",
                     [[1, h, rows, dh], [1, hkv, keys, dh], [1, hkv, keys, dh]],
                     [FLOAT, kv_type, kv_type])
        flops, moved = flops + f, moved + m
    return flops, moved


def kernel_cost(kind: str, layer: int, cfg: ModelConfig, timing: DecoderTiming
                ) -> tuple[float, float]:
    """(flops, bytes) of one kernel of the step (see the module docstring)."""
    t, d, f = timing.n_tokens, cfg.d_model, cfg.d_ff
    h, hkv, dh = cfg.n_heads, cfg.n_kv_heads, cfg.d_head
    if kind in LINEARS:
        return linear_cost(t, timing.linears[layer][kind])
    if kind == "attention":
        return attention_cost(cfg, timing)
    if kind in ("attn_norm", "mlp_norm"):
        with_residual = not (kind == "attn_norm" and layer == 0)
        dims = [[t, d], [t, d], [d]] if with_residual else [[t, d], [d]]
        flops, moved = _aten("aten::mul", dims, [FLOAT] * len(dims))
        return flops, moved + (4.0 * t * d if with_residual else 0.0)
    if kind == "rope":
        return _aten("aten::mul", [[t, h + hkv, dh], [t, 1, dh], [t, 1, dh]], [FLOAT] * 3)
    if kind == "silu_mul":
        return _aten("aten::mul", [[t, f], [t, f]], [FLOAT] * 2)
    if kind == "q_copy":
        return _aten("aten::copy_", [[t, h * dh], [t, h * dh]], [FLOAT] * 2)
    if kind == "kv_write":
        kv_type = KV_TYPES[timing.kv_kind]
        f1, m1 = _aten("aten::copy_", [[t, hkv, dh], [t, hkv, dh]], [kv_type, FLOAT])
        return 2 * f1, 2 * m1
    if kind == "residual_add":
        return _aten("aten::add", [[t, d], [t, d]], [FLOAT] * 2)
    raise ValueError(f"unknown native kernel {kind!r}")


def native_ops(timing: DecoderTiming, cfg: ModelConfig, start_s: float) -> list[StepOp]:
    """The StepOps of one recorded decoder call whose span starts `start_s` after the step's
    start (each kernel at its own offset from the call's entry)."""
    out = []
    for kind, layer, start_ns, end_ns in timing.kernels:
        flops, moved = kernel_cost(kind, layer, cfg, timing)
        out.append(StepOp(name=f"native::{kind}", lane=NATIVE_LANE,
                          start_s=start_s + start_ns / 1e9, dur_s=(end_ns - start_ns) / 1e9,
                          flops=float(flops), bytes=float(moved),
                          shapes=f"T={timing.n_tokens}", layer=layer))
    return out
