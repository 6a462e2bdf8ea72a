"""Low-bit weight products on the native library: y = x · ŵᵀ from the codes, never the fp32
weight, each weight dequantized once in registers and multiplied by every input row (the codes
cross the memory bus once per call however many rows; one OpenMP region per call):

    int8         il_skinny_i8    ŵ = s ⊙ q, q int8 [out, in], s fp32 [out]      (skinny.c)
    int8_groups  il_skinny_i8g   ŵ = d ⊙ q per group of g along in (Q8_0)       (skinny.c)
    fp8          il_skinny_fp8   ŵ = s ⊙ value(c), c E4M3 codes (uint8)         (skinny.c)
    int4         il_lowbit_int4  ŵ = d u + m per group, u 4-bit codes interleaved for the
                                 build's lanes (`interleave`)                   (lowbit.c)
    subtract_zero_point  il_zero_point_sub  y -= (Σ_k x_k) · zero_term (affine INT8)

Each call takes the layer (engines.quant.lowbit_linear: its `in_features`, `out_features` and
`dequantize(rows)`) and its codes, and runs the kernel where it takes the input (fp32 rows on
the CPU, the library loaded, codes laid out for it), else the torch path: `FALLBACK_ROWS`
output rows dequantized at a time and multiplied (correct, slower, never the whole weight).
`operand(...)` describes the codes for the one-call decoder (`decoder.NativeOperand`), or
None where the decoder cannot read them.

Accuracy: the kernels sum in a different order than `x @ dequantize().T`; on random and
SmolLM2 shapes the max |difference| is below 1e-6 of max |y|.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from inferlab.engines.kernels import library as loader
from inferlab.engines.kernels.decoder import NativeOperand
from inferlab.engines.kernels.library import I32, I64, NativeLibrary, P

SIGNATURES = {
    "il_skinny_i8": ([P, P, P, P, I64, I64, I64, I32], None),
    "il_skinny_i8g": ([P, P, P, P, I64, I64, I64, I64, I64, I32], None),
    "il_skinny_fp8": ([P, P, P, P, I64, I64, I64, I32], None),
    "il_lowbit_int4": ([P, P, P, P, P, I64, I64, I64, I64, I64, I32], None),
    "il_int4_lanes": ([], I32),
    "il_zero_point_sub": ([P, P, P, I64, I64, I64], None),
}

FALLBACK_ROWS = 256
"""The torch path dequantizes this many output rows at a time."""
DECODER_ROWS = 64
"""The most input rows the native decoder gives these layers (their kernels take any number;
past it the step is a prefill, which does not run there)."""


class Dequantizes(Protocol):
    """What the torch path reads of a low-bit layer."""

    in_features: int
    out_features: int

    def dequantize(self, rows: slice) -> torch.Tensor: ...


def functions(lib: NativeLibrary):
    """This family's C functions on `lib`, declared."""
    return lib.functions("lowbit", SIGNATURES)


_FNS: list = [None]
"""This CPU's build's functions, once loaded (a call then looks nothing up)."""
_LANES = [0]
"""That build's INT4 lanes (0 before it loads, or where it does not)."""


def _loaded():
    fns = _FNS[0]
    if fns is None:
        lib = loader.library()
        if lib is not None:
            fns = functions(lib)
            _LANES[0] = int(fns.il_int4_lanes())
            _FNS[0] = fns
    return fns


def available() -> bool:
    """Whether the native library runs here (`build_error()` says why not)."""
    return _loaded() is not None


def build_error() -> str | None:
    """Why the native kernels are not in use (None while they are)."""
    return loader.BUILD_ERROR


def int4_lanes() -> int:
    """The lanes of the native library's INT4 layout (8 where it does not load: any layout
    serves the torch path, which reads the codes back with `deinterleave`)."""
    return _LANES[0] if available() else 8


def native_for(x: torch.Tensor, codes_fit: bool = True):
    """The kernels for input `x` where they take it: fp32 on the CPU, the library loaded and
    the layer's codes laid out for a kernel (`codes_fit`); else None (the torch path)."""
    if not codes_fit or x.device.type != "cpu" or x.dtype != torch.float32:
        return None
    return _loaded()


# ---- the kernels, one call each: x [M, K] fp32 contiguous -> y [M, N] -----------------------

def int8_kernel(fns, x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x · (scale ⊙ q)ᵀ; `fns` from `functions(lib)`."""
    (m, k), n = x.shape, q.shape[0]
    y = torch.empty(m, n)
    fns.il_skinny_i8(x.data_ptr(), q.data_ptr(), scale.data_ptr(), y.data_ptr(), m, k, n,
                     torch.get_num_threads())
    return y


def group_int8_kernel(fns, x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor,
                      group_size: int) -> torch.Tensor:
    """x · ŵᵀ, ŵ = d ⊙ q per group of `group_size` along K, scales [N, K / group_size]."""
    (m, k), n = x.shape, q.shape[0]
    y = torch.empty(m, n)
    fns.il_skinny_i8g(x.data_ptr(), q.data_ptr(), scales.data_ptr(), y.data_ptr(), m, k, n,
                      scales.shape[1], group_size, torch.get_num_threads())
    return y


def fp8_kernel(fns, x: torch.Tensor, codes: torch.Tensor,
               row_scales: torch.Tensor) -> torch.Tensor:
    """x · (s ⊙ value(codes))ᵀ, codes E4M3 (uint8) [N, K], s fp32 [N]."""
    (m, k), n = x.shape, codes.shape[0]
    y = torch.empty(m, n)
    fns.il_skinny_fp8(x.data_ptr(), codes.data_ptr(), row_scales.data_ptr(), y.data_ptr(), m, k,
                      n, torch.get_num_threads())
    return y


def int4_kernel(fns, x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                mins: torch.Tensor, group_size: int) -> torch.Tensor:
    """x · ŵᵀ, ŵ = d u + m per group; `codes` interleaved for that build's lanes."""
    (m, k), n = x.shape, codes.shape[0]
    y = torch.empty(m, n)
    fns.il_lowbit_int4(x.data_ptr(), codes.data_ptr(), scales.data_ptr(), mins.data_ptr(),
                       y.data_ptr(), m, k, n, scales.shape[1], group_size,
                       torch.get_num_threads())
    return y


# ---- a layer's call: the kernel where it runs, the torch path where not ---------------------

def int8(layer: Dequantizes, x: torch.Tensor, q: torch.Tensor,
         scale: torch.Tensor) -> torch.Tensor:
    """`layer` (INT8 codes `q`, a scale per row) on x [..., in] -> [..., out]."""
    return _on_rows(layer, x, native_for(x), int8_kernel, q, scale)


def int8_groups(layer: Dequantizes, x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor,
                group_size: int) -> torch.Tensor:
    """`layer` (INT8 codes `q`, a scale per group of `group_size` along in) on x."""
    return _on_rows(layer, x, native_for(x), group_int8_kernel, q, scales, group_size)


def fp8(layer: Dequantizes, x: torch.Tensor, codes: torch.Tensor,
        row_scales: torch.Tensor) -> torch.Tensor:
    """`layer` (E4M3 codes, a scale per row) on x."""
    return _on_rows(layer, x, native_for(x), fp8_kernel, codes, row_scales)


def int4(layer: Dequantizes, x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
         mins: torch.Tensor, group_size: int, lanes: int) -> torch.Tensor:
    """`layer` (4-bit codes interleaved for `lanes`, 0 where they are not interleaved) on x;
    codes laid out for another build's lanes run the torch path."""
    fns = native_for(x, lanes > 0)
    if fns is not None and lanes != _LANES[0]:
        fns = None
    return _on_rows(layer, x, fns, int4_kernel, codes, scales, mins, group_size)


def subtract_zero_point(x: torch.Tensor, y: torch.Tensor, zero_term: torch.Tensor
                        ) -> torch.Tensor:
    """Affine INT8's y − (Σ_k x_k) · zero_term for x [..., in], y [..., out] (y in place on
    the kernel; a new tensor on the torch path, where the kernel does not take x)."""
    fns = native_for(x)
    if fns is None:
        return y - x.float().sum(-1, keepdim=True) * zero_term
    k, n = x.shape[-1], zero_term.shape[0]
    x2 = x if _rows_as_they_are(x, k) else _as_rows(x, k).contiguous()
    fns.il_zero_point_sub(x2.data_ptr(), zero_term.data_ptr(), y.data_ptr(), x2.shape[0], k, n)
    return y


def _as_rows(x: torch.Tensor, in_features: int) -> torch.Tensor:
    if x.shape[-1] != in_features:
        raise ValueError(f"x has {x.shape[-1]} features, the layer takes {in_features}")
    return x.reshape(-1, in_features)


def _rows_as_they_are(x: torch.Tensor, in_features: int) -> bool:
    """Whether `x` is already what the kernels read (2-d contiguous rows of `in_features`,
    at least one): then a call (a decode step's) needs no reshaping or copying."""
    return x.dim() == 2 and x.is_contiguous() and x.shape[1] == in_features and x.shape[0] > 0


def _on_rows(layer: Dequantizes, x: torch.Tensor, fns, kernel: Callable,
             *operands) -> torch.Tensor:
    """`layer` on `x` [..., in]: `kernel(fns, rows, *operands)` on its rows where the library
    runs them (`fns`), the torch path where not; y [..., out]."""
    x2 = x if _rows_as_they_are(x, layer.in_features) else _as_rows(x, layer.in_features)
    if fns is None:
        y = torch_path(layer, x2)
    else:
        y = kernel(fns, x2 if x2 is x else x2.contiguous(), *operands)
    return y if x2 is x else y.reshape(*x.shape[:-1], layer.out_features)


def torch_path(layer: Dequantizes, x: torch.Tensor, chunk_rows: int = FALLBACK_ROWS
               ) -> torch.Tensor:
    """x [M, in] · ŵᵀ with `chunk_rows` rows of the weight dequantized at a time (never the
    whole weight), in fp32; y in x's dtype."""
    out = torch.empty(x.shape[0], layer.out_features, dtype=torch.float32, device=x.device)
    xf = x.float()
    for a in range(0, layer.out_features, chunk_rows):
        rows = slice(a, min(a + chunk_rows, layer.out_features))
        out[:, rows] = xf @ layer.dequantize(rows).to(x.device).t()
    return out.to(x.dtype)


# ---- the one-call decoder's view of a layer -------------------------------------------------

def operand(kind: str, weight: torch.Tensor, out_features: int, in_features: int,
            lanes: int = 0, **fields) -> NativeOperand | None:
    """The codes as the native decoder reads them (`kind`: "int8", "int8g", "fp8" or "int4";
    `fields`: scale, mins, group_size), or None where it cannot: no library, codes off the
    CPU, or INT4 codes not interleaved (`lanes` 0) for this build's lanes."""
    if weight.device.type != "cpu" or not available():
        return None
    if kind == "int4" and lanes != _LANES[0]:
        return None
    return NativeOperand(kind, weight, out_features, in_features, DECODER_ROWS, **fields)


# ---- the INT4 layout --------------------------------------------------------------------------

def _lane_parts(k: int, lanes: int) -> list[tuple[int, int, int]]:
    """(first weight, end, lanes) of a row's two parts: chunks of 8 `lanes` weights, then
    what does not fill one (64 weights when lanes = 16) in chunks of 8 lanes."""
    main = k - k % (8 * lanes)
    return [(a, e, n) for a, e, n in ((0, main, lanes), (main, k, 8)) if e > a]


_NIBBLES = torch.arange(8).view(8, 1) * 4  # bit offset of code j in a word


def interleave(u: torch.Tensor, lanes: int) -> torch.Tensor:
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


def deinterleave(words: torch.Tensor, k: int, lanes: int) -> torch.Tensor:
    """`interleave`'s codes back: int32 [N, K / 8] -> uint8 [N, K]."""
    n = words.shape[0]
    w = words.to(torch.int64) & 0xFFFFFFFF
    parts, at = [], 0
    for a, e, width in _lane_parts(k, lanes):
        chunk = w[:, at:at + (e - a) // 8].view(n, -1, 1, width)
        parts.append(((chunk >> _NIBBLES) & 0xF).reshape(n, e - a))  # [N, chunk, j, lane]
        at += (e - a) // 8
    return torch.cat(parts, 1).to(torch.uint8)
