"""The tie rules and the emulated fused multiply-add, against exact rational arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.quant.rounding import (
    add_half_trunc,
    fma_fp32,
    round_half_away,
    round_half_even,
)


def correctly_rounded_fp32(value: Fraction) -> float:
    """The fp32 nearest to `value`, ties to even: decided by exact comparisons."""
    guess = np.float32(float(value))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess,
                  np.nextafter(guess, np.float32(np.inf))]
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - value),
                                          int(np.array(c).view(np.uint32)) & 1))
    return float(best)


def test_tie_rules_on_exact_ties():
    v = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997])
    assert round_half_even(v).tolist() == [-2, -2, -0, 0, 2, 2, 0, -0]
    assert round_half_away(v).tolist() == [-3, -2, -1, 1, 2, 3, 0, -0]
    # trunc(v + 0.5): 0.49999997 + 0.5 is itself a tie in fp32 and rounds to 1.
    assert add_half_trunc(v[3:7]).tolist() == [1, 2, 3, 1]


def test_fma_double_rounding_case():
    # a·b = 2^-24 + 2^-70: 1 + a·b sits just above the fp32 midpoint 1 + 2^-24,
    # so the FMA gives 1 + 2^-23; rounding to fp64 first lands ON the midpoint, and a second
    # rounding to fp32 would give 1.
    big, other = 2**23 + 2**12 + 1, 2**23 - 2**12 + 1  # big·other = (2^23 + 1)² - 2^24
    assert big * other == 2**46 + 1
    a = torch.tensor([big * 2.0**-23])
    b = torch.tensor([other * 2.0**-47])
    c = torch.tensor([1.0])
    naive = (a.double() * b.double() + c.double()).float()
    assert float(naive) == 1.0
    assert float(fma_fp32(a, b, c)) == 1.0 + 2.0**-23


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e6, 1e6, width=32), st.floats(-1e3, 1e3, width=32),
       st.integers(-200, 200))
def test_fma_is_one_rounding(a, b, c):
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    got = fma_fp32(torch.tensor([a]), torch.tensor([b]), torch.tensor([float(c)]))
    assert float(got) == correctly_rounded_fp32(exact)
