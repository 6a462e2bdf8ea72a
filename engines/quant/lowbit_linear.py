"""Weight-only INT8, FP8 and INT4 linear layers that never materialise the fp32 weight, and a
`Llama` whose linears are low-bit (`lowbit_model`: a plain `Llama`, which counts any linear's
own `nbytes` and out × in parameters).

    Int8Linear: y = (x · qᵀ) ⊙ s        q int8 [out, in], s fp32 [out] (symmetric per row)
    ZeroPointInt8Linear: the same minus (s ⊙ z) Σ x, z a zero point per row (affine INT8)
    GroupInt8Linear: y = Σ_groups d · (x_g · q_gᵀ)   a scale per group of g (Q8_0: g = 32)
    Fp8Linear: y = (x · value(c)ᵀ) S     c FP8 E4M3 codes [out, in], S fp32 per tensor
    Int4Linear: y = Σ_groups d · (x_g · u_gᵀ) + m · Σ x_g    u in [0, 15], groups of g along in

Each computes in fp32 from the codes through `engines.kernels.lowbit`, which runs the native
library's kernels (AVX-512, AVX2 or portable vectors, one OpenMP region per call), each weight
dequantized once in registers and multiplied by every input row, or, without a compiler (or
on another device or dtype), its torch path: `lowbit.FALLBACK_ROWS` rows dequantized at a
time and multiplied (correct, slower, never the whole weight). INT4 codes are stored
lane-interleaved for the library's vector width (`lowbit.interleave`).
Symmetric INT4 codes q in [-8, 7] are stored as u = q + 8 with m = -8 d.

Measured on a 2-vCPU AVX-512 Xeon (1 thread, shared), SmolLM2-135M's four linears of 30
layers per token from DRAM, ms, against the kernels before they took rows in tiles:

    rows        1      4      16     32
    int8      10.8   12.7   33.7   68.4     (before: 12.7, 28.2, 85.1, 160)
    int4 g128  7.1   12.0   44.9   86.8     (before: 7.2, 27.0, 98.9, 203)

and whole-model greedy decode: fp32 22.3 tok/s, INT8 52.2 (2.3x), INT4 69.1 (3.1x), INT8
lm_head for both. (On the earlier AVX2 machine a `torch._weight_int8pack_mm` decode was ~10x
slower than fp32, and a `torch.utils.cpp_extension` build of a kernel took ~55 s: its headers.)
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch

from inferlab.engines.kernels import lowbit
from inferlab.engines.kernels.decoder import NativeOperand
from inferlab.engines.model.linear import Linear
from inferlab.engines.model.llama import Llama
from inferlab.engines.model.moe import ExpertWeights, MoEWeights
from inferlab.engines.quant.affine import quantize_uniform
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.fp8 import decode_fp8
from inferlab.engines.quant.group import GroupQuantized, quantize_groups
from inferlab.engines.quant.model_quant import LINEARS
from inferlab.engines.quant.packing import pack_int4, unpack_int4


def _nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class Int8Linear:
    """y = x · (s ⊙ q)ᵀ with q int8 [out, in] and one fp32 scale per output row."""

    __slots__ = ("q", "scale", "out_features", "in_features")

    def __init__(self, q: torch.Tensor, scale: torch.Tensor) -> None:
        if q.dtype != torch.int8 or q.dim() != 2:
            raise QuantError(f"q must be a 2-d int8 tensor, got {q.dtype} {tuple(q.shape)}")
        if scale.shape != (q.shape[0],):
            raise QuantError(f"scale must have shape ({q.shape[0]},), got {tuple(scale.shape)}")
        self.q = q.contiguous()
        self.scale = scale.to(torch.float32).contiguous()
        self.out_features, self.in_features = q.shape

    @classmethod
    def quantize(cls, weight: torch.Tensor) -> Int8Linear:
        """Symmetric per-output-channel INT8 (`quantize_uniform(..., axis=0, symmetric=True)`)."""
        rec = quantize_uniform(weight.float(), bits=8, axis=0, symmetric=True)
        return cls(rec.q, rec.scale)

    @property
    def nbytes(self) -> int:
        return _nbytes(self.q, self.scale)

    def dequantize(self, rows: slice | torch.Tensor = slice(None)) -> torch.Tensor:
        """fp32 weight rows (all by default): s ⊙ q."""
        return self.q[rows].to(torch.float32) * self.scale[rows, None]

    def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows `ids` dequantized: the layer used as a (tied) embedding table."""
        return self.dequantize(ids)

    def native_operand(self) -> NativeOperand | None:
        """The codes and scales for the native decoder (`engines.kernels.decoder`)."""
        return lowbit.operand("int8", self.q, self.out_features, self.in_features,
                              scale=self.scale)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return lowbit.int8(self, x, self.q, self.scale)


class ZeroPointInt8Linear:
    """Affine INT8 per output row: y = S ⊙ (x · qᵀ) − (S Z) ⊙ Σ_k x_k."""

    __slots__ = ("base", "zero_term", "out_features", "in_features")

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor) -> None:
        self.base = Int8Linear(q, scale)
        self.zero_term = (scale.to(torch.float32) * zero_point.to(torch.float32)).contiguous()
        self.out_features, self.in_features = self.base.out_features, self.base.in_features

    @property
    def nbytes(self) -> int:
        return self.base.nbytes + self.zero_term.numel() * 4

    def native_operand(self) -> NativeOperand | None:
        """The codes' operand with the zero-point term, which the one-call decoder subtracts
        by the same C function as the call below."""
        op = self.base.native_operand()
        return None if op is None else replace(op, zero_term=self.zero_term)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return lowbit.subtract_zero_point(x, self.base(x), self.zero_term)


class GroupInt8Linear:
    """y = Σ_groups d · (x_g · q_gᵀ) with q int8 [out, in] and an fp32 scale d per group of g
    along in (llama.cpp's Q8_0: g = 32), each group's products summed before its one scale."""

    __slots__ = ("q", "scales", "group_size", "out_features", "in_features")

    def __init__(self, q: torch.Tensor, scales: torch.Tensor, group_size: int) -> None:
        if q.dtype != torch.int8 or q.dim() != 2:
            raise QuantError(f"q must be a 2-d int8 tensor, got {q.dtype} {tuple(q.shape)}")
        out, inp = q.shape
        if group_size < 1 or group_size % 16 or inp % group_size:
            raise QuantError(f"group size {group_size} must be a multiple of 16 dividing the "
                             f"{inp} inputs")
        if scales.shape != (out, inp // group_size):
            raise QuantError(f"scales must have shape ({out}, {inp // group_size}), got "
                             f"{tuple(scales.shape)}")
        self.q = q.contiguous()
        self.scales = scales.to(torch.float32).contiguous()
        self.group_size = group_size
        self.out_features, self.in_features = out, inp

    @property
    def nbytes(self) -> int:
        return _nbytes(self.q, self.scales)

    def dequantize(self, rows: slice | torch.Tensor = slice(None)) -> torch.Tensor:
        """fp32 weight rows (all by default): d ⊙ q group by group."""
        q = self.q[rows].to(torch.float32)
        g = self.group_size
        return (q.view(q.shape[0], -1, g) * self.scales[rows, :, None]).view(q.shape[0], -1)

    def native_operand(self) -> NativeOperand | None:
        """The codes and group scales for the native decoder (`engines.kernels.decoder`)."""
        return lowbit.operand("int8g", self.q, self.out_features, self.in_features,
                              scale=self.scales.view(-1), group_size=self.group_size)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return lowbit.int8_groups(self, x, self.q, self.scales, self.group_size)


class Fp8Linear:
    """y = (x · value(c)ᵀ) · S with c FP8 E4M3 codes [out, in] (uint8) and one fp32 scale S per
    tensor (`engines.quant.fp8.quantize_fp8`), the codes decoded in registers by the kernel."""

    __slots__ = ("codes", "scale", "row_scales", "out_features", "in_features")

    def __init__(self, codes: torch.Tensor, scale: torch.Tensor) -> None:
        if codes.dtype != torch.uint8 or codes.dim() != 2:
            raise QuantError(f"codes must be a 2-d uint8 tensor, got {codes.dtype} "
                             f"{tuple(codes.shape)}")
        self.codes = codes.contiguous()
        self.scale = scale.to(torch.float32).reshape(())
        self.out_features, self.in_features = codes.shape
        # the kernels take a scale per output row: S repeated
        self.row_scales = self.scale.expand(self.out_features).contiguous()

    @property
    def nbytes(self) -> int:
        return self.codes.numel() + 4

    def dequantize(self, rows: slice | torch.Tensor = slice(None)) -> torch.Tensor:
        """fp32 weight rows (all by default): S · value(c)."""
        return decode_fp8(self.codes[rows], "e4m3") * self.scale

    def native_operand(self) -> NativeOperand | None:
        """The codes and per-row scales for the native decoder (`engines.kernels.decoder`)."""
        return lowbit.operand("fp8", self.codes, self.out_features, self.in_features,
                              scale=self.row_scales)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return lowbit.fp8(self, x, self.codes, self.row_scales)


class Int4Linear:
    """y = x · ŵᵀ with ŵ = d u + m per group of g along the input (a row's last group may be
    shorter: ragged g128 on rows of 576), u 4-bit codes, d and m fp32 [out, n_groups]."""

    __slots__ = ("codes", "scales", "mins", "group_size", "out_features", "in_features",
                 "interleaved", "lanes")

    def __init__(self, u: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor,
                 group_size: int) -> None:
        n, k = u.shape
        n_groups = -(-k // group_size)
        if scales.shape != (n, n_groups) or mins.shape != (n, n_groups):
            raise QuantError(f"scales and mins must have shape ({n}, {n_groups})")
        self.out_features, self.in_features, self.group_size = n, k, group_size
        # Interleaved codes: the kernel runs rows of 64k weights in groups of 32k.
        self.interleaved = k % 64 == 0 and group_size % 32 == 0
        self.lanes = lowbit.int4_lanes() if self.interleaved else 0
        if self.interleaved:
            self.codes = lowbit.interleave(u, self.lanes)
        else:  # two per byte, element 2i low nibble (the torch path only)
            self.codes = pack_int4(u) if k % 2 == 0 else u.to(torch.uint8).contiguous()
        self.scales = scales.to(torch.float32).contiguous()
        self.mins = mins.to(torch.float32).contiguous()

    @classmethod
    def from_groups(cls, rec: GroupQuantized) -> Int4Linear:
        """From a 4-bit `GroupQuantized` of a [out, in] weight (symmetric or not)."""
        if rec.bits != 4 or rec.q.dim() != 2:
            raise QuantError(f"need 4-bit codes of a 2-d weight, got {rec.bits} bits, shape "
                             f"{tuple(rec.q.shape)}")
        d = rec.scales.to(torch.float32)
        if rec.mins is None:
            return cls((rec.q.to(torch.int16) + 8).to(torch.uint8), d, -8.0 * d, rec.group_size)
        return cls(rec.q, d, rec.mins.to(torch.float32), rec.group_size)

    @classmethod
    def quantize(cls, weight: torch.Tensor, group_size: int = 128,
                 symmetric: bool = False) -> Int4Linear:
        """Round-to-nearest INT4 in ragged groups (the "int4-g128" scheme by default)."""
        return cls.from_groups(quantize_groups(weight.float(), bits=4, group_size=group_size,
                                               symmetric=symmetric, ragged=True))

    @property
    def nbytes(self) -> int:
        return _nbytes(self.codes, self.scales, self.mins)

    def codes_u8(self, rows: slice | torch.Tensor = slice(None)) -> torch.Tensor:
        c = self.codes[rows]
        if self.interleaved:
            return lowbit.deinterleave(c, self.in_features, self.lanes)
        if c.shape[-1] == self.in_features:
            return c
        return unpack_int4(c).to(torch.uint8)

    def dequantize(self, rows: slice | torch.Tensor = slice(None)) -> torch.Tensor:
        u = self.codes_u8(rows).to(torch.float32)
        g, k = self.group_size, self.in_features
        d = self.scales[rows].repeat_interleave(g, dim=-1)[..., :k]
        m = self.mins[rows].repeat_interleave(g, dim=-1)[..., :k]
        return d * u + m

    def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
        return self.dequantize(ids)

    def native_operand(self) -> NativeOperand | None:
        """The interleaved codes, scales and mins for the native decoder, when they are laid
        out for the loaded library's lanes (else None: the torch path reads them)."""
        return lowbit.operand("int4", self.codes, self.out_features, self.in_features,
                              lanes=self.lanes, scale=self.scales, mins=self.mins,
                              group_size=self.group_size)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return lowbit.int4(self, x, self.codes, self.scales, self.mins, self.group_size,
                           self.lanes)


LowBitLinear = Int8Linear | Int4Linear | Fp8Linear | GroupInt8Linear


# ---- the model ---------------------------------------------------------------------------------

def _lowbit(weight: torch.Tensor, bits: int, group_size: int) -> LowBitLinear:
    if bits == 8:
        return Int8Linear.quantize(weight)
    if bits == 4:
        return Int4Linear.quantize(weight, group_size)
    raise QuantError(f"bits must be 8 or 4, got {bits}")


def _lowbit_layer(lw, bits: int, group_size: int):
    """Layer `lw` with its linears `bits`-bit: the four of a dense layer, or qkv, o and every
    expert's gate_up and down in a Mixture-of-Experts layer (the router, d → E, stays as it
    is: it is small and decides which experts run). Norms are copies."""
    norms = dict(attn_norm=lw.attn_norm.clone(), mlp_norm=lw.mlp_norm.clone())
    if lw.moe is None:
        return replace(lw, **norms, **{w: _lowbit(getattr(lw, w).weight, bits, group_size)
                                       for w in LINEARS})

    def expert(e: ExpertWeights) -> ExpertWeights:
        return ExpertWeights(_lowbit(e.gate_up.weight, bits, group_size),
                             _lowbit(e.down.weight, bits, group_size))

    moe = lw.moe
    routed = MoEWeights(moe.router, [expert(e) for e in moe.experts],
                        expert(moe.shared) if moe.shared is not None else None, moe.shared_gate)
    return replace(lw, **norms, qkv=_lowbit(lw.qkv.weight, bits, group_size),
                   o=_lowbit(lw.o.weight, bits, group_size), moe=routed)


def lowbit_model(model: Llama, bits: int = 8, group_size: int = 128,
                 lm_head_bits: int | None = 8) -> Llama:
    """A new model whose linears per layer are `bits`-bit (8: symmetric per channel; 4:
    asymmetric RTN in ragged groups of `group_size`; a MoE layer's experts each, its router
    kept), its lm_head `lm_head_bits`-bit (None keeps it as it is; a tied embedding then reads
    rows from the same codes). An lm_head already held as a file's codes (Gemma 3's Q8_0
    GGUFLinear) is kept as it is either way: it is 8-bit already, and re-quantizing it would
    first expand its 262,144 × 640 weight to 671 MB of fp32.

    Shares nothing mutable with `model`: norms, embedding and RoPE tables are copies (a codes
    lm_head and embedding are read-only). A bf16 or fp16 model is quantized from its weights
    as they are; the result computes in fp32 (the kernels' domain)."""
    if not model.dtype.is_floating_point or model.device.type != "cpu":
        raise QuantError("lowbit_model needs a floating-point model on the CPU")
    out = copy.copy(model)
    out.dtype = torch.float32
    out._decoder = None  # the layers are new: their native plan is made at the first step
    out.layers = [_lowbit_layer(lw, bits, group_size) for lw in model.layers]
    out.final_norm = model.final_norm.clone()
    out.ropes = model.rope_tables(torch.float32)
    if getattr(model.lm_head, "qtype", None) is not None:  # a file's codes, read in place
        out.lm_head, out.embed = model.lm_head, model.embed if model.tied else _copy(model.embed)
    elif lm_head_bits is None:
        out.lm_head = Linear(model.lm_head.weight.float().clone(), kernels=model.kernel_path)
        out.embed = out.lm_head.weight if model.tied else _copy(model.embed)
    else:
        out.lm_head = _lowbit(model.lm_head.weight, lm_head_bits, group_size)
        out.embed = out.lm_head if model.tied else _copy(model.embed)
    return out


def _copy(embed):
    """An fp32 copy of an embedding tensor; one held as codes (read by rows) is read-only:
    kept as it is, never expanded."""
    return embed.float().clone() if isinstance(embed, torch.Tensor) else embed
