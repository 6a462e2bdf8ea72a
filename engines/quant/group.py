"""Group-wise INT-b quantization: one scale (and minimum) per group of g consecutive weights.

Groups run along the last axis (a weight's input dimension), g dividing its length, or, with
`ragged=True`, g consecutive weights from the start of the row and a SHORTER last group
where g does not divide it (SmolLM2's rows of 576 at g = 128: 4 groups of 128 and one of 64;
a row shorter than g is one group). Each group, full or short, has its own d (and m):

    symmetric:   d = max|x| / (2^(b-1) - 1)      q = round(x / d)       x̂ = d q
    asymmetric:  d = (max x - min x) / (2^b - 1)  q = round((x - m) / d)   x̂ = d q + m,  m = min x

The asymmetric form keeps the group minimum m as a float (llama.cpp's Q4_1 convention)
instead of an integer zero point, so a group's minimum is reproduced exactly.

To match llama.cpp's reference quantizers bit for bit, the order of fp32 operations is
theirs: x is multiplied by 1/d (0 when d = 0), and q is computed with the fp32 d and m;
only then are d and m rounded to `scale_dtype` (fp16 in GGUF) for storage, and x̂ uses the
stored values. `rounding` picks the tie rule (see `rounding.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inferlab.engines.quant.affine import SMALLEST_SCALE
from inferlab.engines.quant.checks import check_bits, check_group_size, check_tensor
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.packing import pack_int4
from inferlab.engines.quant.rounding import rounder

SCALE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class GroupQuantized:
    """A tensor quantized in groups along its last axis."""

    q: torch.Tensor
    """The input's shape: int8 codes in [-2^(b-1), 2^(b-1) - 1] when symmetric, uint8
    codes in [0, 2^b - 1] when asymmetric."""
    scales: torch.Tensor
    """d per group, shape (*leading, n_groups), in the storage dtype."""
    mins: torch.Tensor | None
    """m per group (asymmetric), like `scales`; None when symmetric."""
    bits: int
    group_size: int
    """g; the last group of a row is shorter when g does not divide it (`ragged`)."""

    @property
    def symmetric(self) -> bool:
        return self.mins is None

    @property
    def ragged(self) -> bool:
        """True when the rows' last group is shorter than `group_size`."""
        return self.q.shape[-1] % self.group_size != 0

    def dequantize(self) -> torch.Tensor:
        shape = self.q.shape
        q = pad_last(self.q.to(torch.float32), self.group_size)
        q = q.reshape(*shape[:-1], -1, self.group_size)
        x = self.scales.to(torch.float32).unsqueeze(-1) * q
        if self.mins is not None:
            x = x + self.mins.to(torch.float32).unsqueeze(-1)
        return x.reshape(*shape[:-1], -1)[..., : shape[-1]]

    def packed_codes(self) -> torch.Tensor:
        """The INT4 codes two per byte (`pack_int4`); only for 4-bit groups."""
        if self.bits != 4:
            raise QuantError(f"only 4-bit codes pack two per byte; these have {self.bits}")
        return pack_int4(self.q, signed=self.symmetric)

    @property
    def nbytes(self) -> int:
        """Storage: b bits per code, plus each group's scale (and minimum)."""
        per_group = self.scales.element_size() * (1 if self.mins is None else 2)
        return (self.q.numel() * self.bits + 7) // 8 + self.scales.numel() * per_group


def n_groups(length: int, group_size: int) -> int:
    """Groups in a row of `length`: ceil(length / g) (the last one short when ragged)."""
    return -(-length // group_size)


def pad_last(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """x with its last axis padded to a multiple of g by repeating its last element."""
    pad = -x.shape[-1] % group_size
    if not pad:
        return x
    return torch.cat([x, x[..., -1:].expand(*x.shape[:-1], pad)], dim=-1)


def grouped(x: torch.Tensor, group_size: int, ragged: bool = False) -> torch.Tensor:
    """x as (*leading, n_groups, group_size), the group size checked against the last axis
    (which it must divide unless `ragged`: then the last group is padded, see `pad_last`)."""
    if x.dim() == 0:
        raise QuantError("x must have at least one axis to form groups")
    if ragged:
        check_group_size(group_size, group_size)  # positive; any row length will do
        x = pad_last(x, group_size)
    else:
        check_group_size(group_size, x.shape[-1])
    return x.reshape(*x.shape[:-1], x.shape[-1] // group_size, group_size)


def step_of(span: torch.Tensor, levels: int) -> torch.Tensor:
    """A group's step span / levels, at least 2^-126 where the span is not 0 (as the affine
    scale is, SMALLEST_SCALE): a subnormal span would otherwise give a step of 0, and its
    values all the zero code, off by more than half a step."""
    d = span / float(levels)
    return torch.where(span > 0, d.clamp_min(SMALLEST_SCALE), d)


def reciprocal_or_zero(d: torch.Tensor) -> torch.Tensor:
    """1/d, and 0 where d = 0 (an all-zero group: every code becomes the zero code)."""
    safe = torch.where(d == 0, torch.ones_like(d), d)
    return torch.where(d == 0, torch.zeros_like(d), 1.0 / safe)


def finite_or_zero(v: torch.Tensor) -> torch.Tensor:
    # A group of subnormals only has a subnormal d whose reciprocal is inf: 0 · inf is NaN
    # there (llama.cpp leaves that undefined); code 0 for x = 0, the clamp for the rest.
    return torch.nan_to_num(v, nan=0.0)


def quantize_groups(x: torch.Tensor, bits: int = 4, group_size: int = 128,
                    symmetric: bool = False, scale_dtype: torch.dtype = torch.float32,
                    rounding: str = "half_even", ragged: bool = False) -> GroupQuantized:
    """Quantize `x` in groups of `group_size` along its last axis to `bits`-bit codes.

    `ragged` allows a last group shorter than `group_size` in each row; without it a group
    size that does not divide the last axis is a QuantError."""
    x = check_tensor(x)
    check_bits(bits, 2, 8)
    if scale_dtype not in SCALE_DTYPES:
        raise QuantError(f"scale_dtype must be one of {SCALE_DTYPES}, got {scale_dtype}")
    round_ = rounder(rounding)
    g = grouped(x, group_size, ragged)
    if symmetric:
        q_max = (1 << (bits - 1)) - 1
        d = step_of(g.abs().amax(dim=-1, keepdim=True), q_max)
        q = round_(finite_or_zero(g * reciprocal_or_zero(d))).clamp(-q_max, q_max).to(torch.int8)
        mins = None
    else:
        levels = (1 << bits) - 1
        lo = g.amin(dim=-1, keepdim=True)
        d = step_of(g.amax(dim=-1, keepdim=True) - lo, levels)
        q = round_(finite_or_zero((g - lo) * reciprocal_or_zero(d))).clamp(0, levels).to(torch.uint8)
        mins = lo.squeeze(-1).to(scale_dtype)
    q = q.reshape(*x.shape[:-1], -1)[..., : x.shape[-1]].contiguous()
    return GroupQuantized(q=q,
                          scales=d.squeeze(-1).to(scale_dtype), mins=mins, bits=bits,
                          group_size=group_size)
