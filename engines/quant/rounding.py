"""The rounding rules the reference quantizers use, reproduced exactly in fp32.

They differ only at exact .5 ties (and, for `add_half_trunc`, just below them), which is
where a re-implementation stops being bit-exact:

- `round_half_even`: IEEE round-to-nearest-even (`torch.round`, C `nearbyint`); torch's
  quantize ops.
- `round_half_away`: ties away from zero (C `roundf`); llama.cpp's Q8_0.
- `add_half_trunc`: `trunc(v + 0.5)` with the addition rounded in fp32; llama.cpp's Q4_0 and
  Q4_1. v = 0.5 - 2**-25 rounds UP here, because v + 0.5 is itself a tie in fp32 that goes
  to 1.0.
"""

from __future__ import annotations

import torch

from inferlab.engines.quant.errors import QuantError

ROUNDINGS = ("half_even", "half_away", "add_half_trunc")


def round_half_even(v: torch.Tensor) -> torch.Tensor:
    return torch.round(v)


def round_half_away(v: torch.Tensor) -> torch.Tensor:
    # |v| - floor(|v|) is exact in floating point, so the tie test is exact too.
    a = v.abs()
    f = torch.floor(a)
    return torch.copysign(f + (a - f >= 0.5).to(v.dtype), v)


def add_half_trunc(v: torch.Tensor) -> torch.Tensor:
    return torch.trunc(v + 0.5)


def rounder(name: str):
    """The rounding function called `name` (one of ROUNDINGS)."""
    table = {"half_even": round_half_even, "half_away": round_half_away,
             "add_half_trunc": add_half_trunc}
    if name not in table:
        raise QuantError(f"rounding must be one of {', '.join(ROUNDINGS)}, got {name!r}")
    return table[name]


def fma_fp32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """a·b + c with ONE rounding to fp32, as a fused multiply-add instruction computes it.

    torch's per-tensor quantize kernel on x86 (fbgemm, AVX2/AVX-512) evaluates
    x · (1/S) + Z as an FMA; a separate multiply and add differs from it near ties. The
    product of two fp32 values is exact in fp64; the sum is then rounded in fp64 and again
    to fp32, and that double rounding is wrong only when the fp64 sum lands exactly on a
    midpoint between two fp32 values while the exact sum does not. TwoSum gives the fp64
    sum's exact error, which breaks such ties the way the exact sum would.
    """
    p = a.double() * b.double()  # exact: 24 + 24 significand bits fit in 53
    c64 = c.double()
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)  # TwoSum: s + err == p + c exactly
    f = s.float()
    toward = torch.nextafter(f, torch.where(s > f.double(), torch.inf, -torch.inf).float())
    at_midpoint = (s != f.double()) & ((f.double() + toward.double()) * 0.5 == s) & (err != 0)
    # At a midpoint the fp64 tie went to the even neighbour; the exact sum lies to err's side.
    wanted = torch.where(err > 0, torch.maximum(f, toward), torch.minimum(f, toward))
    return torch.where(at_midpoint, wanted, f)
