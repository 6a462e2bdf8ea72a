"""The registry: every CLI name round-trips a weight with the error and size it should."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.quant import SCHEMES, scheme, sqnr_db

BITS = {"int8": 8, "int8-sym": 8, "fp8-e4m3": 8, "fp8-e5m2": 8, "q8_0": 8, "q4_0": 4,
        "q4_1": 4, "int4-g128": 4}
NAMES = tuple(BITS)


def test_the_cli_names_are_registered():
    assert set(NAMES) <= set(SCHEMES)


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_error_and_bytes(name):
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(1)) * 0.02
    s = scheme(name)
    qw = s.quantize(w)
    w_hat = qw.dequantize()
    assert w_hat.shape == w.shape and w_hat.dtype == torch.float32
    assert torch.equal(s.round_trip(w), w_hat)
    bits = BITS[name]
    # A Gaussian weight loses about 6 dB per bit below the ideal (FP8's is flat: ~3 bits).
    floor = {8: 30.0, 4: 14.0}[bits] if not name.startswith("fp8") else 15.0
    assert sqnr_db(w, w_hat) > floor
    assert w.numel() * bits / 8 <= qw.nbytes < w.numel() * bits / 8 * 1.3


def test_one_dimensional_weights_use_one_scale():
    qv = scheme("int8").quantize(torch.randn(10))
    assert qv.axis is None
