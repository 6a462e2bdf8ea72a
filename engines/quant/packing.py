"""INT4 codes packed two per byte, and back, losslessly.

Byte i of the last axis holds element 2i in its low nibble and element 2i + 1 in its high
nibble. Signed codes (-8..7) are stored as their 4-bit two's complement. llama.cpp's Q4
blocks use another order (element j and j + 16 share a byte); `gguf_blocks` permutes the
codes into that order and then calls `pack_int4`.
"""

from __future__ import annotations

import torch

from inferlab.engines.quant.errors import QuantError


def pack_int4(q: torch.Tensor, signed: bool = False) -> torch.Tensor:
    """uint8 tensor with the last axis halved: two 4-bit codes per byte."""
    if q.is_floating_point() or q.dtype == torch.bool:
        raise QuantError(f"q must be an integer tensor, got {q.dtype}")
    if q.dim() == 0 or q.shape[-1] % 2:
        raise QuantError(f"q's last axis must have an even length to pack, got shape "
                         f"{tuple(q.shape)}")
    low, high = (-8, 7) if signed else (0, 15)
    if q.numel() and (int(q.min()) < low or int(q.max()) > high):
        raise QuantError(f"q must hold {'signed' if signed else 'unsigned'} 4-bit codes in "
                         f"[{low}, {high}], got [{int(q.min())}, {int(q.max())}]")
    nibbles = (q.to(torch.int16) & 0xF).to(torch.uint8)
    return nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)


def unpack_int4(packed: torch.Tensor, signed: bool = False) -> torch.Tensor:
    """The codes `pack_int4` packed: int8, the last axis doubled."""
    if packed.dtype != torch.uint8:
        raise QuantError(f"packed must be a uint8 tensor, got {packed.dtype}")
    low = (packed & 0xF).to(torch.int8)
    high = (packed >> 4).to(torch.int8)
    codes = torch.stack([low, high], dim=-1).flatten(-2)
    if signed:
        codes = torch.where(codes >= 8, codes - 16, codes)
    return codes
