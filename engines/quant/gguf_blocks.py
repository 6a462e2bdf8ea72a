"""llama.cpp's Q8_0, Q4_0 and Q4_1 blocks, bit-exact with the `gguf` package's quantizer.

Every block holds 32 consecutive weights of a row (GGUF's QK = 32) with fp16 parameters:

    Q8_0  (34 bytes): d = max|x| / 127,   q = round_half_away(x / d) in [-127, 127],  x̂ = d q
    Q4_0  (18 bytes): d = x[argmax|x|] / -8 (signed!), u = trunc(x / d + 8.5) in [0, 15],
                      x̂ = d (u - 8): the largest-magnitude weight maps to code 0 exactly
    Q4_1  (20 bytes): d = (max - min) / 15, m = min, u = trunc((x - m) / d + 0.5) in [0, 15],
                      x̂ = d u + m

"/ d" is a multiply by the fp32 1/d (0 for d = 0) throughout, as in llama.cpp; d and m are
rounded to fp16 only when stored. In a 4-bit block, byte j holds code j (low nibble) and
code j + 16 (high nibble). `to_gguf_bytes` lays the blocks out as a GGUF file stores them:
one row of blocks per row of the tensor.
"""

from __future__ import annotations

import torch

from inferlab.engines.quant.checks import check_tensor
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.group import (
    GroupQuantized,
    finite_or_zero,
    grouped,
    quantize_groups,
    reciprocal_or_zero,
)
from inferlab.engines.quant.packing import pack_int4

BLOCK = 32
"""Weights per block (llama.cpp's QK8_0 = QK4_0 = QK4_1)."""
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18, "q4_1": 20}
KINDS = tuple(BLOCK_BYTES)


def quantize_q8_0(x: torch.Tensor) -> GroupQuantized:
    return quantize_groups(x, bits=8, group_size=BLOCK, symmetric=True,
                           scale_dtype=torch.float16, rounding="half_away")


def quantize_q4_1(x: torch.Tensor) -> GroupQuantized:
    return quantize_groups(x, bits=4, group_size=BLOCK, symmetric=False,
                           scale_dtype=torch.float16, rounding="add_half_trunc")


def quantize_q4_0(x: torch.Tensor) -> GroupQuantized:
    """Q4_0: symmetric 4-bit codes u - 8 in [-8, 7], with a SIGNED scale.

    d takes the sign of the largest-magnitude weight (the first one, on a tie of |x|), so
    that weight lands on -8, the code with no positive twin: all 16 codes are used.
    """
    x = check_tensor(x)
    g = grouped(x, BLOCK)
    peak = torch.gather(g, -1, g.abs().argmax(dim=-1, keepdim=True))
    d = peak / -8.0
    # One fp32 addition of 8.5, as llama.cpp writes it: (v + 8) + 0.5 rounds differently.
    u = torch.trunc(finite_or_zero(g * reciprocal_or_zero(d)) + 8.5).clamp(0, 15)
    return GroupQuantized(q=(u - 8).to(torch.int8).reshape(x.shape),
                          scales=d.squeeze(-1).to(torch.float16), mins=None, bits=4,
                          group_size=BLOCK)


QUANTIZERS = {"q8_0": quantize_q8_0, "q4_0": quantize_q4_0, "q4_1": quantize_q4_1}


def _fp16_bytes(t: torch.Tensor) -> torch.Tensor:
    """(..., n_blocks) fp16 -> (..., n_blocks, 2) little-endian bytes."""
    return t.to(torch.float16).contiguous().unsqueeze(-1).view(torch.uint8)


def to_gguf_bytes(gq: GroupQuantized, kind: str) -> torch.Tensor:
    """The bytes GGUF stores for `gq` as `kind` (q8_0, q4_0, q4_1): shape
    (*leading, n_blocks · block bytes), uint8, as `gguf.quants.quantize` returns them."""
    if kind not in BLOCK_BYTES:
        raise QuantError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    want = {"q8_0": (8, True), "q4_0": (4, True), "q4_1": (4, False)}[kind]
    if (gq.bits, gq.symmetric) != want or gq.group_size != BLOCK:
        raise QuantError(f"these codes ({gq.bits}-bit, groups of {gq.group_size}, "
                         f"{'symmetric' if gq.symmetric else 'asymmetric'}) are not {kind}")
    leading = gq.q.shape[:-1]
    codes = grouped(gq.q, BLOCK)  # (*leading, n_blocks, 32)
    parts = [_fp16_bytes(gq.scales)]
    if kind == "q8_0":
        parts.append(codes.contiguous().view(torch.uint8))
    else:
        if kind == "q4_0":
            codes = codes + 8  # back to llama.cpp's unsigned u = q + 8
        # code j and code j + 16 share byte j: interleave the block's halves, pack pairs.
        halves = codes.reshape(*codes.shape[:-1], 2, BLOCK // 2).transpose(-1, -2)
        parts.append(pack_int4(halves.reshape(codes.shape).to(torch.uint8)))
        if kind == "q4_1":
            parts.insert(1, _fp16_bytes(gq.mins))
    blocks = torch.cat(parts, dim=-1)
    return blocks.reshape(*leading, -1)


def quantize_gguf(x: torch.Tensor, kind: str) -> torch.Tensor:
    """`x` quantized to `kind`'s GGUF bytes: what `gguf.quants.quantize(x, kind)` returns."""
    if kind not in QUANTIZERS:
        raise QuantError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return to_gguf_bytes(QUANTIZERS[kind](x), kind)
