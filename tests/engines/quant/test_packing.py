"""INT4 packing: two codes per byte, lossless, low nibble first."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.quant import QuantError, pack_int4, unpack_int4


def test_layout_low_nibble_first():
    packed = pack_int4(torch.tensor([1, 2, 15, 0]))
    assert packed.tolist() == [0x21, 0x0F]
    assert pack_int4(torch.tensor([-8, 7, -1, 0]), signed=True).tolist() == [0x78, 0x0F]


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 4), st.integers(1, 40), st.booleans(), st.integers(0, 2**31))
def test_pack_unpack_is_lossless(rows, half, signed, seed):
    gen = torch.Generator().manual_seed(seed)
    low, high = (-8, 8) if signed else (0, 16)
    q = torch.randint(low, high, (rows, 2 * half), generator=gen, dtype=torch.int8)
    packed = pack_int4(q, signed=signed)
    assert packed.shape == (rows, half) and packed.dtype == torch.uint8
    assert torch.equal(unpack_int4(packed, signed=signed), q)


def test_bad_codes_are_refused():
    with pytest.raises(QuantError, match="even length"):
        pack_int4(torch.tensor([1, 2, 3]))
    with pytest.raises(QuantError, match="4-bit codes"):
        pack_int4(torch.tensor([0, 16]))
    with pytest.raises(QuantError, match="4-bit codes"):
        pack_int4(torch.tensor([-9, 0]), signed=True)
    with pytest.raises(QuantError, match="integer"):
        pack_int4(torch.tensor([0.0, 1.0]))
    with pytest.raises(QuantError, match="uint8"):
        unpack_int4(torch.tensor([1, 2]))
