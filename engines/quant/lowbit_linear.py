"""Weight-only INT8, FP8 and INT4 linear layers that never materialise the fp32 weight, and a
`Llama` whose linears are low-bit (`lowbit_model`: a plain `Llama`, which counts any linear's
own `nbytes` and out × in parameters).

    Int8Linear: y = (x · qᵀ) ⊙ s        q int8 [out, in], s fp32 [out] (symmetric per row)
    ZeroPointInt8Linear: the same minus (s ⊙ z) Σ x, z a zero point per row (affine INT8)
    GroupInt8Linear: y = Σ_groups d · (x_g · q_gᵀ)   a scale per group of g (Q8_0: g = 32)
    Fp8Linear: y = (x · value(c)ᵀ) S     c FP8 E4M3 codes [out, in], S fp32 per tensor
    Int4Linear: y = Σ_groups d · (x_g · u_gᵀ) + m · Σ x_g    u in [0, 15], groups of g along in

Both compute in fp32 from the codes on the native library's kernels (engines/kernels: INT8
in `skinny.c` beside fp32 and bf16, INT4 in `lowbit.c`; AVX-512, AVX2 or portable vectors,
one OpenMP region per call), each weight dequantized once in registers and multiplied by every
input row: the codes cross the memory bus once per call however many rows. INT4 codes are
stored lane-interleaved for the library's vector width (`_interleave`). Without a compiler
(or on another device or dtype) a torch path dequantizes at most `FALLBACK_ROWS` rows at a
time and multiplies them: correct, slower, never the whole weight.
Symmetric INT4 codes q in [-8, 7] are stored as u = q + 8 with m = -8 d.

Measured on a 2-vCPU AVX-512 Xeon (1 thread, shared), SmolLM2-135M's four linears of 30
layers per token from DRAM, ms, against the kernels before they took rows in tiles:

    rows        1      4      16     32
    int8      10.8   12.7   33.7   68.4     (before: 12.7, 28.2, 85.1, 160)
    int4 g128  7.1   12.0   44.9   86.8     (before: 7.2, 27.0, 98.9, 203)

and whole-model greedy decode: fp32 22.3 tok/s, INT8 52.2 (2.3x), INT4 69.1 (3.1x), INT8
lm_head for both. (On the earlier AVX2 machine a `torch._weight_int8pack_mm` decode was ~10x
slower than fp32, and a `torch.utils.cpp_extension` build of a kernel took ~55 s: its headers.)

Accuracy: the kernels sum in a different order than `x @ dequantize().T`; on random and
SmolLM2 shapes the max |difference| is below 1e-6 of max |y|.
"""

from __future__ import annotations

import copy
import ctypes
from dataclasses import replace

import torch

from inferlab.engines.kernels import library as native
from inferlab.engines.kernels.decoder import NativeOperand
from inferlab.engines.model.linear import Linear
from inferlab.engines.model.llama import Llama
from inferlab.engines.model.rope import RopeTables
from inferlab.engines.quant.affine import quantize_uniform
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.fp8 import decode_fp8
from inferlab.engines.quant.group import GroupQuantized, quantize_groups
from inferlab.engines.quant.model_quant import LINEARS
from inferlab.engines.quant.packing import pack_int4, unpack_int4

FALLBACK_ROWS = 256
"""The torch path dequantizes this many output rows at a time."""
DECODER_ROWS = 64
"""The most input rows the native decoder gives these layers (their kernels take any number;
past it the step is a prefill, which does not run there)."""


def kernel_library() -> ctypes.CDLL | None:
    """The native library's handle (engines/kernels: built on first use, then cached on
    disk), or None when it does not build here or is turned off (`lib_error()` says why)."""
    lib = native.library()
    return None if lib is None else lib.cdll


def lib_error() -> str | None:
    """Why the native kernels are not in use (None while they are)."""
    return native.BUILD_ERROR


def _nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _as_rows(x: torch.Tensor, in_features: int) -> torch.Tensor:
    if x.shape[-1] != in_features:
        raise ValueError(f"x has {x.shape[-1]} features, the layer takes {in_features}")
    return x.reshape(-1, in_features)


_LANES = [0]
"""The loaded library's int4 lanes (0 before it loads, or where it does not)."""
_LIB: list = [None]  # the library once loaded (kept: a call then looks nothing up)


def _rows_as_they_are(x: torch.Tensor, in_features: int) -> bool:
    """Whether `x` is already what the kernels read (2-d contiguous rows of `in_features`,
    at least one): then a call (a decode step's) needs no reshaping or copying."""
    return x.dim() == 2 and x.is_contiguous() and x.shape[1] == in_features and x.shape[0] > 0


def _use_kernel(x: torch.Tensor, ok: bool) -> ctypes.CDLL | None:
    """The kernel library for input `x` when the layer's codes can run on it (`ok`)."""
    if not ok or x.device.type != "cpu" or x.dtype != torch.float32:
        return None
    lib = _LIB[0]
    if lib is None:
        lib = _LIB[0] = kernel_library()
        _LANES[0] = int(lib.il_int4_lanes()) if lib is not None else 0
    return lib


def int8_kernel(lib: ctypes.CDLL, x: torch.Tensor, q: torch.Tensor,
                scale: torch.Tensor) -> torch.Tensor:
    """x [M, K] fp32 contiguous · (scale ⊙ q)ᵀ on the native kernel of `lib` (`skinny.c`)."""
    (m, k), n = x.shape, q.shape[0]
    y = torch.empty(m, n)
    lib.il_skinny_i8(x.data_ptr(), q.data_ptr(), scale.data_ptr(), y.data_ptr(), m, k, n,
                     torch.get_num_threads())
    return y


def group_int8_kernel(lib: ctypes.CDLL, x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor,
                      group_size: int) -> torch.Tensor:
    """x [M, K] fp32 contiguous · ŵᵀ, ŵ = d ⊙ q per group of `group_size` along K
    (`skinny.c`)."""
    (m, k), n = x.shape, q.shape[0]
    y = torch.empty(m, n)
    lib.il_skinny_i8g(x.data_ptr(), q.data_ptr(), scales.data_ptr(), y.data_ptr(), m, k, n,
                      scales.shape[1], group_size, torch.get_num_threads())
    return y


def fp8_kernel(lib: ctypes.CDLL, x: torch.Tensor, codes: torch.Tensor,
               row_scales: torch.Tensor) -> torch.Tensor:
    """x [M, K] fp32 contiguous · (s ⊙ value(codes))ᵀ, codes E4M3 (uint8) [N, K], s fp32 [N]
    (`skinny.c`)."""
    (m, k), n = x.shape, codes.shape[0]
    y = torch.empty(m, n)
    lib.il_skinny_fp8(x.data_ptr(), codes.data_ptr(), row_scales.data_ptr(), y.data_ptr(), m, k,
                      n, torch.get_num_threads())
    return y


def int4_kernel(lib: ctypes.CDLL, x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                mins: torch.Tensor, group_size: int) -> torch.Tensor:
    """x [M, K] fp32 contiguous · ŵᵀ on the native kernel of `lib` (`lowbit.c`), `codes`
    interleaved for that library's lanes."""
    (m, k), n = x.shape, codes.shape[0]
    y = torch.empty(m, n)
    lib.il_lowbit_int4(x.data_ptr(), codes.data_ptr(), scales.data_ptr(), mins.data_ptr(),
                       y.data_ptr(), m, k, n, scales.shape[1], group_size,
                       torch.get_num_threads())
    return y


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
        if self.q.device.type != "cpu" or kernel_library() is None:
            return None
        return NativeOperand("int8", self.q, self.out_features, self.in_features, DECODER_ROWS,
                             scale=self.scale)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _on_rows(self, x, _use_kernel(x, True), int8_kernel, self.q, self.scale)


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
        y = self.base(x)
        lib = _use_kernel(x, True)
        if lib is None:
            return y - x.float().sum(-1, keepdim=True) * self.zero_term
        x2 = x if _rows_as_they_are(x, self.in_features) else \
            _as_rows(x, self.in_features).contiguous()
        lib.il_zero_point_sub(x2.data_ptr(), self.zero_term.data_ptr(), y.data_ptr(),
                              x2.shape[0], self.in_features, self.out_features)
        return y


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
        if self.q.device.type != "cpu" or kernel_library() is None:
            return None
        return NativeOperand("int8g", self.q, self.out_features, self.in_features,
                             DECODER_ROWS, scale=self.scales.view(-1),
                             group_size=self.group_size)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _on_rows(self, x, _use_kernel(x, True), group_int8_kernel, self.q, self.scales,
                        self.group_size)


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
        if self.codes.device.type != "cpu" or kernel_library() is None:
            return None
        return NativeOperand("fp8", self.codes, self.out_features, self.in_features,
                             DECODER_ROWS, scale=self.row_scales)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _on_rows(self, x, _use_kernel(x, True), fp8_kernel, self.codes, self.row_scales)


def _lane_parts(k: int, lanes: int) -> list[tuple[int, int, int]]:
    """(first weight, end, lanes) of a row's two parts: chunks of 8 `lanes` weights, then
    what does not fill one (64 weights when lanes = 16) in chunks of 8 lanes."""
    main = k - k % (8 * lanes)
    return [(a, e, n) for a, e, n in ((0, main, lanes), (main, k, 8)) if e > a]


_NIBBLES = torch.arange(8).view(8, 1) * 4  # bit offset of code j in a word


def _interleave(u: torch.Tensor, lanes: int) -> torch.Tensor:
    """uint8 codes [N, K] (K a multiple of 64) -> int32 [N, K / 8] in the kernel's layout:
    per chunk of 8 `lanes` weights, word t holds weight (chunk start + lanes j + t) in bits
    4j..4j+3, so a vector of `lanes` words gives `lanes` consecutive codes per shift."""
    n, k = u.shape
    parts = []
    for a, e, width in _lane_parts(k, lanes):
        v = u[:, a:e].to(torch.int64).view(n, -1, 8, width)  # [N, chunk, j, lane]
        parts.append((v << _NIBBLES).sum(2).reshape(n, -1))
    words = torch.cat(parts, 1)
    return torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32).contiguous()


def _deinterleave(words: torch.Tensor, k: int, lanes: int) -> torch.Tensor:
    n = words.shape[0]
    w = words.to(torch.int64) & 0xFFFFFFFF
    parts, at = [], 0
    for a, e, width in _lane_parts(k, lanes):
        chunk = w[:, at:at + (e - a) // 8].view(n, -1, 1, width)
        parts.append(((chunk >> _NIBBLES) & 0xF).reshape(n, e - a))  # [N, chunk, j, lane]
        at += (e - a) // 8
    return torch.cat(parts, 1).to(torch.uint8)


def _int4_lanes() -> int:
    """The lanes of the native library's int4 layout (8 where it does not load: any layout
    serves the torch path, which reads the codes back with `_deinterleave`)."""
    lib = kernel_library()
    return int(lib.il_int4_lanes()) if lib is not None else 8


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
        self.lanes = _int4_lanes() if self.interleaved else 0
        if self.interleaved:
            self.codes = _interleave(u, self.lanes)
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
            return _deinterleave(c, self.in_features, self.lanes)
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
        lib = kernel_library()
        if (lib is None or not self.interleaved or self.codes.device.type != "cpu"
                or self.lanes != int(lib.il_int4_lanes())):
            return None
        return NativeOperand("int4", self.codes, self.out_features, self.in_features,
                             DECODER_ROWS, scale=self.scales, mins=self.mins,
                             group_size=self.group_size)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        lib = _use_kernel(x, self.interleaved)
        if lib is not None and self.lanes != _LANES[0]:
            lib = None  # codes laid out for another build's lanes: the torch path reads them
        return _on_rows(self, x, lib, int4_kernel, self.codes, self.scales, self.mins,
                        self.group_size)


LowBitLinear = Int8Linear | Int4Linear | Fp8Linear | GroupInt8Linear


def _on_rows(layer: LowBitLinear, x: torch.Tensor, lib: ctypes.CDLL | None, kernel,
             *operands) -> torch.Tensor:
    """`layer` on `x` [..., in]: `kernel(lib, rows, *operands)` on its rows where the library
    runs them (`lib`), the torch path where not; y [..., out]."""
    x2 = x if _rows_as_they_are(x, layer.in_features) else _as_rows(x, layer.in_features)
    if lib is None:
        y = _chunked(layer, x2)
    else:
        y = kernel(lib, x2 if x2 is x else x2.contiguous(), *operands)
    return y if x2 is x else y.reshape(*x.shape[:-1], layer.out_features)


def _chunked(layer: LowBitLinear, x: torch.Tensor) -> torch.Tensor:
    """The torch path: FALLBACK_ROWS rows of the weight dequantized at a time."""
    out = torch.empty(x.shape[0], layer.out_features, dtype=torch.float32, device=x.device)
    xf = x.float()
    for a in range(0, layer.out_features, FALLBACK_ROWS):
        rows = slice(a, min(a + FALLBACK_ROWS, layer.out_features))
        out[:, rows] = xf @ layer.dequantize(rows).to(x.device).t()
    return out.to(x.dtype)


# ---- the model ---------------------------------------------------------------------------------

def _lowbit(weight: torch.Tensor, bits: int, group_size: int) -> LowBitLinear:
    if bits == 8:
        return Int8Linear.quantize(weight)
    if bits == 4:
        return Int4Linear.quantize(weight, group_size)
    raise QuantError(f"bits must be 8 or 4, got {bits}")


def lowbit_model(model: Llama, bits: int = 8, group_size: int = 128,
                 lm_head_bits: int | None = 8) -> Llama:
    """A new model whose four linears per layer are `bits`-bit (8: symmetric per channel;
    4: asymmetric RTN in ragged groups of `group_size`), its lm_head `lm_head_bits`-bit
    (None keeps it as it is; a tied embedding then reads rows from the same codes).

    Shares nothing mutable with `model`: norms, embedding and RoPE tables are copies. A bf16
    or fp16 model is quantized from its weights as they are; the result computes in fp32 (the
    kernels' domain)."""
    if not model.dtype.is_floating_point or model.device.type != "cpu":
        raise QuantError("lowbit_model needs a floating-point model on the CPU")
    out = copy.copy(model)
    out.dtype = torch.float32
    out._decoder = None  # the layers are new: their native plan is made at the first step
    out.layers = [replace(lw, attn_norm=lw.attn_norm.clone(), mlp_norm=lw.mlp_norm.clone(),
                          **{w: _lowbit(getattr(lw, w).weight, bits, group_size)
                             for w in LINEARS})
                  for lw in model.layers]
    out.final_norm = model.final_norm.clone()
    if model.dtype == torch.float32:
        out.rope = copy.deepcopy(model.rope)
    else:
        c = model.config
        out.rope = RopeTables(c.d_head, c.max_position, c.rope_theta, torch.float32,
                              model.device)
    if lm_head_bits is None:
        out.lm_head = Linear(model.lm_head.weight.float().clone())
        out.embed = out.lm_head.weight if model.tied else model.embed.float().clone()
    else:
        out.lm_head = _lowbit(model.lm_head.weight, lm_head_bits, group_size)
        out.embed = out.lm_head if model.tied else model.embed.float().clone()
    return out
