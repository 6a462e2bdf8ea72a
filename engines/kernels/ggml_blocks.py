"""Products over GGUF tensors read as the file stores them (`ggml_blocks.c`): y = x · ŵᵀ with
W a GGUF tensor's raw block bytes [out, row_bytes] (uint8, typically a view of the file's
memory map), each block dequantized in registers and multiplied by the fp32 rows of x:

    il_ggml_matmul      vector path: a tile of 4 output rows; up to REGISTER_ROWS input rows
                        each 32 weights decoded into registers, more: 256 weights at a time
                        into L1, each chunk multiplied by up to MAX_ROWS input rows (both
                        ways the same products in the same order: equal bit for bit)
    il_ggml_matmul_ref  the scalar reference (weight-by-weight decoders, plain dot products)
    il_ggml_dequantize  rows dequantized to fp32 (vector or scalar decoders)

Types (ggml's ids): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K (`COVERED`). x is never
quantized, so y equals `gguf.quants.dequantize(W) @ x.T` up to fp32 rounding order.

Beside them, llama.cpp's numerics, for whoever asks (`GGUFLinear(activations="q8")`):

    il_ggml_quantize_x  x rounded per 32 values to int8 (dx = amax / 127), sums per 16
    il_ggml_matmul_q8   y from integer dot products per block (scalar reference, AVX2
                        maddubs, AVX-512 VNNI vpdpbusd: `q8_kernels`), then dx · scale;
                        y differs from `matmul` by x's rounding

Each call returns None where the kernel does not take the operands (no library, tensors off
the CPU or not fp32, a type not covered): the caller (engines.quant.gguf_linear) then runs its
torch path.
"""

from __future__ import annotations

import torch
from gguf import GGMLQuantizationType as QT
from gguf.constants import GGML_QUANT_SIZES

from inferlab.engines.kernels import library as loader
from inferlab.engines.kernels.library import I32, I64, NativeLibrary, P

SIGNATURES = {
    "il_ggml_matmul": ([I32, P, P, P, I64, I64, I64, I32], I32),
    "il_ggml_matmul_ref": ([I32, P, P, P, I64, I64, I64], I32),
    "il_ggml_dequantize": ([I32, P, P, I64, I64, I32, I32], I32),
    "il_ggml_quantize_x": ([P, P, P, P, I64, I64], I32),
    "il_ggml_q8_kernels": ([], I32),
    "il_ggml_matmul_q8": ([I32, P, P, P, I64, I64, I64, I32, I32], I32),
}
"""(type, x, w, y, M, K, N[, threads]) and (type, w, out, rows, K, reference, threads); each
returns 0, or -1 for a type the C does not cover. The quantized-activation path: (x, q, dx,
s16, M, K); () -> the kernels run here as bits of Q8_KERNELS; (type, x, w, y, M, K, N,
threads, kernel)."""

Q8_KERNELS = ("scalar", "avx2", "vnni")
"""The quantized-activation path's kernels by their C number: the scalar reference, AVX2
(maddubs + madd) and AVX-512 VNNI (vpdpbusd)."""

COVERED = frozenset({QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0, QT.Q4_K, QT.Q5_K, QT.Q6_K})
"""The block types the kernels decode."""

REGISTER_ROWS = 4
"""Up to this many input rows (GB_REG_ROWS in the C) the weights are decoded into registers
(the decode shapes); more are decoded into an L1 buffer shared by up to MAX_ROWS rows."""

MAX_ROWS = 16
"""Input rows one decoded chunk of the weight serves (GB_MAX_ROWS in the C): up to here the
codes are decoded once per call; past it the kernel decodes again per 16 rows."""


def functions(lib: NativeLibrary):
    """This family's C functions on `lib`, declared."""
    return lib.functions("ggml_blocks", SIGNATURES)


def _fns():
    lib = loader.library()
    return None if lib is None else functions(lib)


def available() -> bool:
    """Whether the native library runs here (`library.BUILD_ERROR` says why not)."""
    return _fns() is not None


def block_shape(qtype: QT) -> tuple[int, int]:
    """(weights, bytes) of one block of `qtype`."""
    return GGML_QUANT_SIZES[qtype]


def row_bytes(qtype: QT, in_features: int) -> int:
    """Bytes of one row of `in_features` weights (a multiple of the block's weights)."""
    qk, nbytes = block_shape(qtype)
    if in_features % qk:
        raise ValueError(f"{qtype.name} rows hold whole blocks of {qk}, not {in_features}")
    return in_features // qk * nbytes


def takes(x: torch.Tensor, raw: torch.Tensor, qtype: QT) -> bool:
    """Whether the kernel takes these operands: fp32 x and uint8 codes on the CPU, a covered
    type (the library's presence is checked by the calls)."""
    return (qtype in COVERED and x.device.type == "cpu" and x.dtype == torch.float32
            and raw.device.type == "cpu" and raw.dtype == torch.uint8)


def _operands(x: torch.Tensor, raw: torch.Tensor, qtype: QT, out_features: int, fns):
    """(fns, contiguous x, M, K, N) for a product, or None where the kernels do not run (no
    library, or `takes` says no); ValueError where `raw` does not hold [N, K] of `qtype`."""
    fns = fns or _fns()
    if fns is None or not takes(x, raw, qtype):
        return None
    x = x.contiguous()
    (m, k), n = x.shape, out_features
    if raw.numel() != n * row_bytes(qtype, k):
        raise ValueError(f"{raw.numel()} bytes of {qtype.name} codes do not hold [{n}, {k}]")
    return fns, x, m, k, n


def _check(rc: int, qtype: QT) -> None:
    if rc:
        raise ValueError(f"the native kernels do not take {qtype.name} (code {rc})")


def matmul(x: torch.Tensor, raw: torch.Tensor, qtype: QT, out_features: int,
           reference: bool = False, fns=None) -> torch.Tensor | None:
    """x [M, K] fp32 · ŵᵀ -> y [M, out_features], `raw` the [out, row_bytes] block bytes
    (contiguous); the scalar reference with `reference`. None where the kernel does not run
    (no library, or `takes` says no). `fns`: a build's functions (`functions(lib)`), for
    tests that run each instruction set; default this CPU's."""
    operands = _operands(x, raw, qtype, out_features, fns)
    if operands is None:
        return None
    fns, x, m, k, n = operands
    y = torch.empty(m, n)
    if reference:
        rc = fns.il_ggml_matmul_ref(int(qtype), x.data_ptr(), raw.data_ptr(), y.data_ptr(),
                                    m, k, n)
    else:
        rc = fns.il_ggml_matmul(int(qtype), x.data_ptr(), raw.data_ptr(), y.data_ptr(), m, k,
                                n, torch.get_num_threads())
    _check(rc, qtype)
    return y


def dequantize(raw: torch.Tensor, qtype: QT, rows: int, in_features: int,
               reference: bool = False, fns=None) -> torch.Tensor | None:
    """`rows` rows of block bytes (uint8, contiguous, on the CPU) -> fp32 [rows, in_features],
    or None where the kernels do not run."""
    fns = fns or _fns()
    if fns is None or qtype not in COVERED or raw.device.type != "cpu":
        return None
    if raw.numel() != rows * row_bytes(qtype, in_features):
        raise ValueError(f"{raw.numel()} bytes of {qtype.name} codes do not hold "
                         f"[{rows}, {in_features}]")
    out = torch.empty(rows, in_features)
    _check(fns.il_ggml_dequantize(int(qtype), raw.data_ptr(), out.data_ptr(), rows,
                                  in_features, int(reference), torch.get_num_threads()), qtype)
    return out


# ---- the quantized-activation path (llama.cpp's numerics; opt-in) ---------------------------

def q8_kernels(fns=None) -> tuple[str, ...]:
    """The quantized-activation kernels this build runs on this CPU (names of Q8_KERNELS;
    the fastest last); () without the library."""
    fns = fns or _fns()
    if fns is None:
        return ()
    bits = fns.il_ggml_q8_kernels()
    return tuple(name for i, name in enumerate(Q8_KERNELS) if bits >> i & 1)


def quantize_x(x: torch.Tensor, fns=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [M, K] fp32 (K a multiple of 32) as the quantized path reads it, per 32 values:
    q int8 [M, K] = rint(x · 127 / amax), dx fp32 [M, K / 32] = amax / 127, and the sums of q
    per 16 values, int32 [M, K / 16]."""
    fns = fns or _fns()
    x = x.contiguous().float()
    (m, k) = x.shape
    if k % 32:
        raise ValueError(f"x rows of {k} values are not whole blocks of 32")
    q = torch.empty(m, k, dtype=torch.int8)
    dx = torch.empty(m, k // 32)
    s16 = torch.empty(m, k // 16, dtype=torch.int32)
    fns.il_ggml_quantize_x(x.data_ptr(), q.data_ptr(), dx.data_ptr(), s16.data_ptr(), m, k)
    return q, dx, s16


def matmul_q8(x: torch.Tensor, raw: torch.Tensor, qtype: QT, out_features: int,
              kernel: str | None = None, fns=None) -> torch.Tensor | None:
    """x [M, K] fp32 · ŵᵀ with x quantized per 32 values to int8 (`quantize_x`) and integer
    dot products per block, as llama.cpp computes: y differs from `matmul`'s by x's rounding,
    at most sum over blocks b of dx_b / 2 · sum_(k in b) |ŵ_k| per output (plus fp32
    rounding). `kernel`: one of `q8_kernels()` (default the fastest). None where the kernels do
    not run (no library, `takes` says no)."""
    operands = _operands(x, raw, qtype, out_features, fns)
    if operands is None:
        return None
    fns, x, m, k, n = operands
    which = -1 if kernel is None else Q8_KERNELS.index(kernel)
    y = torch.empty(m, n)
    rc = fns.il_ggml_matmul_q8(int(qtype), x.data_ptr(), raw.data_ptr(), y.data_ptr(), m, k, n,
                               torch.get_num_threads(), which)
    if rc == -1 and kernel is not None:
        raise ValueError(f"the {kernel} kernel does not run here (have {q8_kernels(fns)})")
    if rc == -2:
        raise MemoryError("no memory for x's codes")
    _check(rc, qtype)
    return y
